//! `render_tool` layout: header, approval note, input, output and example lines.

use serde_json::json;
use toolshed_schema::{example_call, render_schema, render_tool};

#[test]
fn tool_text_has_all_parts_in_order() {
    let input = json!({
        "type": "object",
        "required": ["owner", "repo"],
        "properties": {
            "owner": {"type": "string", "description": "The account owner. Not case sensitive."},
            "repo": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
        }
    });
    let output = json!({"type": "object", "properties": {
        "id": {"type": "integer"},
        "user": {"type": "object", "properties": {"login": {"type": "string"}, "site": {"type": "object", "properties": {"url": {"type": "string"}}}}}
    }});
    let text = render_tool(
        "github.repos.delete",
        "Delete Repository",
        "Deletes a repository.\nNeeds admin rights.",
        &input,
        Some(&output),
        true,
    );
    let expected = "github.repos.delete — Delete Repository\n\
Deletes a repository\n\
destructive: needs approval\n\
input:\nowner: string — Account owner\nrepo: string\nlabels?: array\n  items: object\n    name?: string\n\
output:\nid?: integer\nuser?: object\n  login?: string\n  site?: object {url}\n\
example: await tools.github.repos.delete({owner: \"owner\", repo: \"repo\"})\n";
    assert_eq!(text, expected);
}

#[test]
fn empty_input_and_non_object_roots() {
    let text = render_tool(
        "x.ping",
        "Ping",
        "",
        &json!({"type": "object"}),
        None,
        false,
    );
    assert_eq!(
        text,
        "x.ping — Ping\ninput: none\nexample: await tools.x.ping({})\n"
    );
    assert_eq!(
        render_schema(&json!({"type": "string", "maxLength": 3})),
        "(value): string, len <= 3\n"
    );
}

#[test]
fn shared_refs_are_expanded_once() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/User"}, "b": {"$ref": "#/$defs/User"}},
        "$defs": {"User": {"type": "object", "properties": {"login": {"type": "string"}}}}
    });
    assert_eq!(
        render_schema(&schema),
        "a?: User object\n  login?: string\nb?: → User (see above)\n"
    );
}

#[test]
fn terse_notation() {
    let schema = json!({
        "type": "object",
        "required": ["user_id"],
        "additionalProperties": false,
        "properties": {
            "user_id": {"type": "string", "description": "User ID"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null,
                      "description": "The maximum number of rows to return, counted after filters (1-100)."}
        }
    });
    assert_eq!(
        render_schema(&schema),
        "(closed)\n\
user_id: string\n\
tags?: string[], items >= 1\n\
limit?: integer|null — Maximum number of rows to return\n"
    );
    assert_eq!(
        render_schema(&json!({"type": "object", "additionalProperties": false})),
        "(no keys)\n"
    );
}

#[test]
fn plain_enums_defaults_and_restated_names() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tokenName": {"type": "string", "description": "Name of the token"},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            "unit": {"anyOf": [{"const": 1}, {"const": 7}], "default": 1},
            "meta": {"type": "object", "additionalProperties": false, "properties": {"k": {"type": "string"}}}
        }
    });
    assert_eq!(
        render_schema(&schema),
        "tokenName?: string\n\
mode?: fast | slow = fast\n\
unit?: 1|7 = 1\n\
meta?: closed object\n  k?: string\n"
    );
}

#[test]
fn much_smaller_than_the_json() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/search_trials.json")).expect("fixture");
    let text = render_schema(&schema);
    assert!(
        text.len() * 5 < schema.to_string().len() * 3,
        "{} vs {}",
        text.len(),
        schema.to_string().len()
    );
    assert_eq!(
        example_call("bio.trials.search", &schema),
        "await tools.bio.trials.search({})"
    );
}

#[test]
fn unions_told_apart_by_a_constant_are_labelled_by_it() {
    let schema = json!({
        "type": "object",
        "properties": {"tools": {"type": "array", "items": {"oneOf": [
            {"type": "object", "properties": {"type": {"const": "a"}, "x": {"type": "string"}}, "required": ["type", "x"]},
            {"type": "object", "properties": {"type": {"const": "b"}, "y": {"type": "integer"}}, "required": ["type"]}
        ]}}}
    });
    let text = toolshed_schema::render_schema(&schema);
    assert_eq!(
        text,
        "tools?: array\n  items: one of (by type)\n    type = a:\n      x: string\n    type = b:\n      y?: integer\n"
    );
}
