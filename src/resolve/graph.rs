//! The compatibility graph a query used: releases as nodes, constraints as edges, each edge
//! with its verdict and source. `gpuenv graph --dot` prints it.

use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;
use std::fmt::Write as _;

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
    fn label(&self) -> String {
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

    /// The graph in Graphviz DOT: green holds, orange is conditional, red fails.
    pub fn to_dot(&self) -> String {
        let mut out =
            String::from("digraph gpuenv {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n");
        for i in self.graph.node_indices() {
            let n = &self.graph[i];
            let shape = match n {
                Node::Build(_) => "box",
                Node::Gpu(_) => "component",
                Node::Driver(_) => "hexagon",
                _ => "ellipse",
            };
            let _ = writeln!(out, "  n{} [label={:?}, shape={shape}];", i.index(), n.label());
        }
        for e in self.graph.edge_indices() {
            let (a, b) = self.graph.edge_endpoints(e).expect("edge has endpoints");
            let w = &self.graph[e];
            let color = match w.status {
                Status::Compatible => "darkgreen",
                Status::Conditional => "orange",
                Status::Incompatible => "red",
            };
            let tooltip = w.source.as_deref().unwrap_or("");
            let _ = writeln!(
                out,
                "  n{} -> n{} [label={:?}, color={color}, fontcolor={color}, tooltip={:?}];",
                a.index(),
                b.index(),
                w.label,
                tooltip
            );
        }
        out.push_str("}\n");
        out
    }
}
