//! `gpuenv graph --dot`: the compatibility graph a query used, in Graphviz DOT.

use std::io::{self, Write};

use crate::resolve::Status;
use crate::resolve::graph::{Graph, Node};

/// The graph in DOT: green holds, orange is conditional, red fails; each edge's source is
/// its tooltip.
pub fn graph_dot(out: &mut dyn Write, graph: &Graph) -> io::Result<()> {
    writeln!(out, "digraph gpuenv {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [shape=box, fontname=\"Helvetica\"];")?;
    for (i, n) in graph.nodes() {
        let shape = match n {
            Node::Build(_) => "box",
            Node::Gpu(_) => "component",
            Node::Driver(_) => "hexagon",
            _ => "ellipse",
        };
        writeln!(out, "  n{i} [label={:?}, shape={shape}];", n.label())?;
    }
    for (a, b, w) in graph.edges() {
        let color = match w.status {
            Status::Compatible => "darkgreen",
            Status::Conditional => "orange",
            Status::Incompatible => "red",
        };
        let tooltip = w.source.as_deref().unwrap_or("");
        writeln!(
            out,
            "  n{a} -> n{b} [label={:?}, color={color}, fontcolor={color}, tooltip={:?}];",
            w.label, tooltip
        )?;
    }
    writeln!(out, "}}")
}
