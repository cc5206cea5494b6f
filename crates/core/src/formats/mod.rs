//! Tool-definition formats: reading client-tool declarations ([`client`]) and writing the
//! catalog as definitions of a model API or protocol ([`export`]).

pub mod client;
pub mod export;

pub use client::{parse_client_tools, ClientTool, ClientToolsError};
pub use export::{export, exported_path, ExportFormat};
