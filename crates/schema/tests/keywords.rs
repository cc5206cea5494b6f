//! Every JSON Schema validation keyword present in a schema shows up in its rendering.

use serde_json::{json, Value};
use toolshed_schema::render_schema;

/// (keyword, property schema, texts that must appear in the rendering)
fn cases() -> Vec<(&'static str, Value, Vec<&'static str>)> {
    vec![
        ("type", json!({"type": "integer"}), vec!["integer"]),
        (
            "type array with null",
            json!({"type": ["string", "null"]}),
            vec!["string|null"],
        ),
        (
            "enum",
            json!({"type": "string", "enum": ["asc", "desc"]}),
            vec!["field?: asc | desc\n"],
        ),
        (
            "enum mixed",
            json!({"enum": [1, "two", null]}),
            vec![r#"1|"two"|null"#],
        ),
        (
            "enum needing quotes",
            json!({"type": "string", "enum": ["a b", "null", "7"]}),
            vec![
                r#"field?: "a b"|"null"|"7"
"#,
            ],
        ),
        (
            "enum nullable",
            json!({"type": ["string", "null"], "enum": ["on", "off", null]}),
            vec!["field?: on | off | null\n"],
        ),
        (
            "anyOf of consts",
            json!({"anyOf": [{"type": "string", "const": "x"}, {"const": "y", "title": "Y"}]}),
            vec!["field?: x | y\n"],
        ),
        (
            "const",
            json!({"const": "fixed"}),
            vec!["field?: \"fixed\"\n"],
        ),
        (
            "multipleOf",
            json!({"type": "number", "multipleOf": 0.5}),
            vec!["multiple of 0.5"],
        ),
        (
            "maximum",
            json!({"type": "integer", "maximum": 100}),
            vec!["<= 100"],
        ),
        (
            "exclusiveMaximum",
            json!({"type": "integer", "exclusiveMaximum": 7}),
            vec!["< 7"],
        ),
        (
            "minimum",
            json!({"type": "integer", "minimum": 3}),
            vec![">= 3"],
        ),
        (
            "exclusiveMinimum",
            json!({"type": "number", "exclusiveMinimum": 0}),
            vec!["> 0"],
        ),
        (
            "exclusiveMinimum draft 4",
            json!({"type": "number", "minimum": 2, "exclusiveMinimum": true}),
            vec!["> 2"],
        ),
        (
            "maxLength",
            json!({"type": "string", "maxLength": 40}),
            vec!["len <= 40"],
        ),
        (
            "minLength",
            json!({"type": "string", "minLength": 2}),
            vec!["len >= 2"],
        ),
        (
            "pattern",
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            vec!["pattern /^[a-z]+$/"],
        ),
        (
            "maxItems",
            json!({"type": "array", "maxItems": 9}),
            vec!["items <= 9"],
        ),
        (
            "minItems",
            json!({"type": "array", "minItems": 1}),
            vec!["items >= 1"],
        ),
        (
            "uniqueItems",
            json!({"type": "array", "uniqueItems": true}),
            vec!["unique"],
        ),
        (
            "contains",
            json!({"type": "array", "contains": {"type": "string", "const": "x"}}),
            vec![r#"contains "x""#],
        ),
        (
            "maxContains",
            json!({"type": "array", "contains": {"type": "integer"}, "maxContains": 4}),
            vec!["contains count <= 4"],
        ),
        (
            "minContains",
            json!({"type": "array", "contains": {"type": "integer"}, "minContains": 2}),
            vec!["contains count >= 2"],
        ),
        (
            "prefixItems",
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            vec!["[string, integer]", "no extra items"],
        ),
        (
            "items",
            json!({"type": "array", "items": {"type": "string", "format": "uri"}}),
            vec!["field?: string<uri>[]"],
        ),
        (
            "items tuple draft 7",
            json!({"type": "array", "items": [{"type": "boolean"}], "additionalItems": {"type": "number"}}),
            vec!["[boolean]", "extra items: number"],
        ),
        (
            "additionalItems",
            json!({"type": "array", "items": [{"type": "boolean"}], "additionalItems": false}),
            vec!["no extra items"],
        ),
        (
            "maxProperties",
            json!({"type": "object", "maxProperties": 5}),
            vec!["keys <= 5"],
        ),
        (
            "minProperties",
            json!({"type": "object", "minProperties": 1}),
            vec!["keys >= 1"],
        ),
        (
            "required",
            json!({"type": "object", "required": ["inner"], "properties": {"inner": {"type": "string"}}}),
            vec!["inner: string\n"],
        ),
        (
            "required without property",
            json!({"type": "object", "required": ["ghost"]}),
            vec!["requires ghost"],
        ),
        (
            "dependentRequired",
            json!({"type": "object", "dependentRequired": {"card": ["cvv", "expiry"]}}),
            vec!["card requires cvv, expiry"],
        ),
        (
            "dependentSchemas",
            json!({"type": "object", "dependentSchemas": {"card": {"required": ["cvv"]}}}),
            vec!["if card present:", "requires cvv"],
        ),
        (
            "properties",
            json!({"type": "object", "properties": {"deep": {"type": "boolean"}}}),
            vec!["deep?: boolean"],
        ),
        (
            "patternProperties",
            json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}}),
            vec!["/^x-/?: string"],
        ),
        (
            "additionalProperties false",
            json!({"type": "object", "additionalProperties": false}),
            vec!["field?: closed object\n"],
        ),
        (
            "additionalProperties schema",
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            vec!["extra keys: integer"],
        ),
        (
            "propertyNames",
            json!({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}),
            vec!["key names:", "pattern /^[a-z]+$/"],
        ),
        (
            "unevaluatedItems",
            json!({"type": "array", "unevaluatedItems": false}),
            vec!["no unevaluated items"],
        ),
        (
            "unevaluatedProperties",
            json!({"type": "object", "unevaluatedProperties": false}),
            vec!["no unevaluated keys"],
        ),
        (
            "unevaluatedProperties schema",
            json!({"type": "object", "unevaluatedProperties": {"type": "string"}}),
            vec!["unevaluated keys: string"],
        ),
        (
            "allOf",
            json!({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"required": ["a"], "properties": {"b": {"type": "integer", "minimum": 1}}}]}),
            vec!["a: string\n", "b?: integer, >= 1"],
        ),
        (
            "allOf conflicting",
            json!({"allOf": [{"type": "string", "maxLength": 5}, {"maxLength": 3}]}),
            vec!["len <= 5", "& any (len <= 3)"],
        ),
        (
            "anyOf",
            json!({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}),
            vec!["string | integer (>= 0)"],
        ),
        (
            "oneOf",
            json!({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}, {"minLength": 2}]}),
            vec!["one of string | integer (>= 0) | any (len >= 2)"],
        ),
        (
            "oneOf of disjoint types",
            json!({"oneOf": [{"type": "string"}, {"type": "boolean"}]}),
            vec!["field?: string|boolean\n"],
        ),
        (
            "minimum and maximum",
            json!({"type": "integer", "minimum": 1, "maximum": 100}),
            vec!["field?: integer, 1..100\n"],
        ),
        (
            "not",
            json!({"type": "string", "not": {"const": ""}}),
            vec![r#"not """#],
        ),
        (
            "if/then/else",
            json!({"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"required": ["y"]}}),
            vec![
                r#"if object {kind?: "a"}"#,
                "then any (requires x)",
                "else any (requires y)",
            ],
        ),
        (
            "format",
            json!({"type": "string", "format": "date-time"}),
            vec!["string<date-time>"],
        ),
        (
            "default",
            json!({"type": "integer", "default": 30}),
            vec!["field?: integer = 30\n"],
        ),
        (
            "nullable",
            json!({"type": "string", "nullable": true}),
            vec!["string|null"],
        ),
        (
            "readOnly",
            json!({"type": "string", "readOnly": true}),
            vec!["read-only"],
        ),
        (
            "writeOnly",
            json!({"type": "string", "writeOnly": true}),
            vec!["write-only"],
        ),
        (
            "contentEncoding",
            json!({"type": "string", "contentEncoding": "base64"}),
            vec!["encoding base64"],
        ),
        (
            "contentMediaType",
            json!({"type": "string", "contentMediaType": "image/png"}),
            vec!["media image/png"],
        ),
        (
            "discriminator",
            json!({"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "pet", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}}),
            vec![
                "one of Cat|Dog",
                "discriminator pet (cat→Cat, dog→Dog)",
                "meows: boolean",
                "barks?: boolean",
            ],
        ),
        (
            "$ref",
            json!({"$ref": "#/$defs/Cat"}),
            vec!["Cat object", "meows: boolean\n"],
        ),
        (
            "$ref definitions",
            json!({"$ref": "#/definitions/Size"}),
            vec!["integer", "<= 9"],
        ),
        (
            "$ref components",
            json!({"$ref": "#/components/schemas/Color"}),
            vec!["red | blue"],
        ),
        (
            "$ref recursive",
            json!({"$ref": "#/$defs/Node"}),
            vec![
                "children?: array of → Node (recursive)",
                "next?: → Node (recursive)",
            ],
        ),
    ]
}

fn wrap(prop: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {"field": prop},
        "$defs": {
            "Cat": {"type": "object", "required": ["meows"], "properties": {"meows": {"type": "boolean"}}},
            "Dog": {"type": "object", "properties": {"barks": {"type": "boolean"}}},
            "Node": {"type": "object", "properties": {
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                "next": {"$ref": "#/$defs/Node"}
            }}
        },
        "definitions": {"Size": {"type": "integer", "maximum": 9}},
        "components": {"schemas": {"Color": {"enum": ["red", "blue"]}}}
    })
}

#[test]
fn every_validation_keyword_is_rendered() {
    let mut failures = Vec::new();
    for (keyword, prop, expected) in cases() {
        let text = render_schema(&wrap(&prop));
        for e in expected {
            if !text.contains(e) {
                failures.push(format!("{keyword}: {e:?} missing from\n{text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_cases_cover_every_keyword() {
    let covered: Vec<&str> = cases().iter().map(|c| c.0).collect();
    let all = [
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "contains",
        "prefixItems",
        "items",
        "additionalItems",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "dependentSchemas",
        "properties",
        "patternProperties",
        "additionalProperties false",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if/then/else",
        "format",
        "default",
        "nullable",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "discriminator",
        "$ref",
    ];
    for k in all {
        assert!(covered.contains(&k), "no case for {k}");
    }
    // Every case's keyword really occurs in its schema.
    for (keyword, prop, _) in cases() {
        let first = keyword.split([' ', '/']).next().unwrap_or(keyword);
        assert!(
            prop.to_string().contains(&format!("\"{first}\"")),
            "{keyword} not in its schema"
        );
    }
}

#[test]
fn constraints_survive_long_descriptions() {
    let long = "A very long description. ".repeat(20);
    let schema = json!({"type": "object", "properties": {"q": {"type": "string", "description": long, "maxLength": 12, "pattern": "^q"}}});
    let text = render_schema(&schema);
    assert!(text.contains("len <= 12"));
    assert!(text.contains("pattern /^q/"));
    assert!(text.contains("— Very long description\n"), "{text}");
}
