//! Compact schema text for `read_tool`.
//!
//! [`render_tool`] writes what an agent needs to call a tool in far fewer tokens
//! than the JSON Schema: a header, one line per input field with its type, every
//! validation constraint and a shortened description, the output fields and an
//! example call. [`render_schema`] writes the field lines alone and
//! [`example_call`] the example line alone.
//!
//! ```
//! use serde_json::json;
//! let input = json!({"type": "object", "required": ["owner"],
//!     "properties": {"owner": {"type": "string", "description": "Account owner."}}});
//! let text = toolshed_schema::render_tool("github.repos.list", "List Repos", "Lists repositories.", &input, None, false);
//! assert!(text.contains("input:\nowner: string — Account owner\n"));
//! assert!(text.contains("example: await tools.github.repos.list({owner: \"owner\"})"));
//! ```

mod example;
mod render;
pub mod text;

use serde_json::Value;

use render::Renderer;
use text::{first_sentence, TOOL_DESCRIPTION_CHARS};

/// Block nesting shown for output schemas; deeper objects are reduced to their key lists.
pub const OUTPUT_DEPTH: usize = 2;

/// The full `read_tool` text of a tool.
pub fn render_tool(
    path: &str,
    name: &str,
    description: &str,
    input: &Value,
    output: Option<&Value>,
    destructive: bool,
) -> String {
    let mut out = format!("{path} — {name}\n");
    let summary = first_sentence(description, TOOL_DESCRIPTION_CHARS);
    if !summary.is_empty() {
        out.push_str(&summary);
        out.push('\n');
    }
    if destructive {
        out.push_str("destructive: needs approval\n");
    }
    let fields = render_schema(input);
    if fields.is_empty() {
        out.push_str("input: none\n");
    } else {
        out.push_str("input:\n");
        out.push_str(&fields);
    }
    if let Some(output) = output {
        let mut r = Renderer::new(output, Some(OUTPUT_DEPTH));
        r.root_fields(output, 0);
        let fields = r.finish();
        if !fields.is_empty() {
            out.push_str("output:\n");
            out.push_str(&fields);
        }
    }
    out.push_str("example: ");
    out.push_str(&example_call(path, input));
    out.push('\n');
    out
}

/// The field lines of a schema (root fields at column 0, one field a line, nested
/// fields two spaces deeper per level).
/// A schema that is not an object is written as one `(value):` line.
pub fn render_schema(schema: &Value) -> String {
    let mut r = Renderer::new(schema, None);
    r.root_fields(schema, 0);
    r.finish()
}

/// One line: `await tools.<path>({...})` with plausible values for the required fields.
pub fn example_call(path: &str, input: &Value) -> String {
    format!("await tools.{path}({})", example::example_arguments(input))
}
