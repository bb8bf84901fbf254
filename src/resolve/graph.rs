//! The compatibility graph a query used: releases as nodes, constraints as edges, each edge
//! with its verdict and source, built from the rules' outcomes. `gpuenv graph --dot` prints
//! it (through `report`).

use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

use super::Status;

/// A release in the graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    /// A torch build (`2.4.1+cu121`).
    Build(String),
    /// A Python (`3.11`).
    Python(String),
    /// A CUDA release line (`12.1`).
    Cuda(String),
    /// A cuDNN release.
    Cudnn(String),
    /// A driver branch (`R535`).
    Driver(String),
    /// A GPU.
    Gpu(String),
}

impl Node {
    /// How the node is labelled (`torch 2.4.1+cu121`, `R535`).
    pub fn label(&self) -> String {
        match self {
            Node::Build(s) => format!("torch {s}"),
            Node::Python(s) => format!("Python {s}"),
            Node::Cuda(s) => format!("CUDA {s}"),
            Node::Cudnn(s) => format!("cuDNN {s}"),
            Node::Driver(s) => format!("driver {s}"),
            Node::Gpu(s) => s.clone(),
        }
    }
}

/// A constraint between two releases.
#[derive(Debug, Clone)]
pub struct Edge {
    /// What the constraint is (`SASS sm_90`, `needs >= 550.54.14`).
    pub label: String,
    /// Whether it held.
    pub status: Status,
    /// The record's source.
    pub source: Option<String>,
}

impl Edge {
    /// A new edge.
    pub fn new(label: &str, status: Status, source: Option<String>) -> Edge {
        Edge {
            label: label.to_string(),
            status,
            source,
        }
    }
}

/// The graph, with nodes deduplicated.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    graph: DiGraph<Node, Edge>,
    index: HashMap<Node, NodeIndex>,
}

impl Graph {
    fn node(&mut self, n: Node) -> NodeIndex {
        if let Some(i) = self.index.get(&n) {
            return *i;
        }
        let i = self.graph.add_node(n.clone());
        self.index.insert(n, i);
        i
    }

    /// Adds an edge (once: the same constraint between the same nodes is kept once).
    pub fn edge(&mut self, from: Node, to: Node, e: Edge) {
        let (a, b) = (self.node(from), self.node(to));
        let dup = self
            .graph
            .edges_connecting(a, b)
            .any(|x| x.weight().label == e.label);
        if !dup {
            self.graph.add_edge(a, b, e);
        }
    }

    /// Number of nodes and edges.
    pub fn size(&self) -> (usize, usize) {
        (self.graph.node_count(), self.graph.edge_count())
    }

    /// The nodes, each with its index.
    pub fn nodes(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.graph.node_indices().map(|i| (i.index(), &self.graph[i]))
    }

    /// The edges, each as `(from, to, edge)` by node index.
    pub fn edges(&self) -> impl Iterator<Item = (usize, usize, &Edge)> {
        self.graph.edge_indices().filter_map(|e| {
            let (a, b) = self.graph.edge_endpoints(e)?;
            Some((a.index(), b.index(), &self.graph[e]))
        })
    }
}
