//! Pure parsers (being written).
