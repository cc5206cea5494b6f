//! Importing from SDL and introspection JSON fixtures, and refusing bad input.

use serde_json::{json, Map, Value};
use toolshed_core::CompiledSchema;
use toolshed_graphql::{import_schema, GraphqlError, GraphqlOptions, Imported, SchemaInput};

fn fixture(name: &str) -> String {
    toolshed_testing::fixture_text!(name)
}

fn opts(ns: &str) -> GraphqlOptions {
    GraphqlOptions::new(ns, "http://127.0.0.1:1/graphql")
}

fn swapi() -> Imported {
    import_schema(
        &SchemaInput::Sdl(fixture("swapi.schema.graphql")),
        &opts("swapi"),
    )
    .unwrap()
}

fn tool<'a>(imported: &'a Imported, path: &str) -> &'a toolshed_core::Tool {
    imported
        .tools
        .iter()
        .find(|t| t.def.path.as_str() == path)
        .unwrap_or_else(|| panic!("no tool {path}"))
}

fn document(imported: &Imported, path: &str, args: Value) -> String {
    let op = imported
        .operations
        .iter()
        .find(|o| o.path.as_str() == path)
        .unwrap();
    let args: Map<String, Value> = args.as_object().unwrap().clone();
    op.document(&args, None).unwrap()
}

#[test]
fn swapi_tools_paths_and_flags() {
    let imported = swapi();
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let paths: Vec<&str> = imported.tools.iter().map(|t| t.def.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "swapi.query.all_films",
            "swapi.query.film",
            "swapi.query.all_people",
            "swapi.query.person",
            "swapi.query.all_planets",
            "swapi.query.planet",
            "swapi.query.all_species",
            "swapi.query.species",
            "swapi.query.all_starships",
            "swapi.query.starship",
            "swapi.query.all_vehicles",
            "swapi.query.vehicle",
            "swapi.query.node",
        ]
    );
    for t in &imported.tools {
        assert!(t.def.annotations.read_only, "{}", t.def.path);
        assert!(!t.def.annotations.destructive, "{}", t.def.path);
        assert_eq!(t.def.origin, "source:swapi");
        CompiledSchema::compile(&t.def.input_schema).unwrap();
        CompiledSchema::compile(t.def.output_schema.as_ref().unwrap()).unwrap();
    }
    assert_eq!(
        tool(&imported, "swapi.query.all_films").def.name,
        "All Films"
    );
}

#[test]
fn swapi_input_schemas() {
    let imported = swapi();
    let node = &tool(&imported, "swapi.query.node").def;
    assert_eq!(node.input_schema["required"], json!(["id"]));
    assert_eq!(node.input_schema["properties"]["id"]["type"], "string");
    assert_eq!(
        node.description,
        "Fetches an object given its ID\n\nReturns `Node`."
    );
    let film = &tool(&imported, "swapi.query.film").def;
    assert!(film.input_schema.get("required").is_none());
    let props = film.input_schema["properties"].as_object().unwrap();
    assert_eq!(
        props.keys().collect::<Vec<_>>(),
        ["id", "filmID", "_selection"]
    );
    let all = &tool(&imported, "swapi.query.all_films").def;
    assert_eq!(all.input_schema["properties"]["first"]["type"], "integer");
    let compiled = CompiledSchema::compile(&all.input_schema).unwrap();
    assert!(compiled.is_valid(&json!({"first": 3, "after": "x"})));
    assert!(!compiled.is_valid(&json!({"first": "three"})));
    assert!(!compiled.is_valid(&json!({"unknown": 1})));
}

#[test]
fn swapi_generated_documents() {
    let imported = swapi();
    assert_eq!(
        document(&imported, "swapi.query.node", json!({"id": "ZmlsbXM6MQ=="})),
        "query Node($id: ID!) { node(id: $id) { __typename id } }"
    );
    assert_eq!(
        document(&imported, "swapi.query.planet", json!({"planetID": "1"})),
        "query Planet($planetID: ID) { planet(planetID: $planetID) { name diameter rotationPeriod \
         orbitalPeriod gravity population climates terrains surfaceWater residentConnection { \
         totalCount } filmConnection { totalCount } created edited id } }"
    );
    let all = document(&imported, "swapi.query.all_films", json!({"first": 2}));
    assert!(
        all.starts_with(
            "query AllFilms($first: Int) { allFilms(first: $first) { pageInfo { hasNextPage"
        ),
        "{all}"
    );
    assert!(all.contains("films { title episodeID"), "{all}");
    // Depth 1 keeps only the root object's own leaves.
    let mut shallow = opts("swapi");
    shallow.selection_depth = 1;
    let flat = import_schema(&SchemaInput::Sdl(fixture("swapi.schema.graphql")), &shallow).unwrap();
    assert_eq!(
        document(&flat, "swapi.query.all_films", json!({})),
        "query AllFilms { allFilms { totalCount } }"
    );
}

fn library_from_sdl() -> Imported {
    import_schema(
        &SchemaInput::Sdl(fixture("library.schema.graphql")),
        &opts("lib"),
    )
    .unwrap()
}

#[test]
fn library_enums_inputs_and_mutations() {
    let imported = library_from_sdl();
    let paths: Vec<&str> = imported.tools.iter().map(|t| t.def.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "lib.query.book",
            "lib.query.books",
            "lib.query.count",
            "lib.query.broken",
            "lib.query.whoami",
            "lib.mutation.add_book"
        ]
    );
    let add = &tool(&imported, "lib.mutation.add_book").def;
    assert!(add.annotations.destructive && !add.annotations.read_only);
    assert_eq!(add.input_schema["required"], json!(["input"]));
    let def = &add.input_schema["$defs"]["BookInput"];
    assert_eq!(def["required"], json!(["title", "genre", "authorName"]));
    assert_eq!(
        def["properties"]["genre"]["enum"],
        json!(["FICTION", "SCIENCE", "HISTORY"])
    );

    let books = &tool(&imported, "lib.query.books").def;
    assert!(
        books.input_schema.get("required").is_none(),
        "first has a default"
    );
    assert_eq!(books.input_schema["properties"]["first"]["default"], 10);
    let filter = &books.input_schema["$defs"]["BookFilter"];
    assert_eq!(
        filter["properties"]["any"]["items"]["$ref"],
        "#/$defs/BookFilter"
    );
    let compiled = CompiledSchema::compile(&books.input_schema).unwrap();
    assert!(compiled.is_valid(&json!({"filter": {"any": [{"genre": "SCIENCE"}]}})));
    assert!(!compiled.is_valid(&json!({"filter": {"any": [{"genre": "POETRY"}]}})));

    let count = &tool(&imported, "lib.query.count").def;
    assert!(count.input_schema["properties"].get("_selection").is_none());
    assert_eq!(
        count.output_schema.as_ref().unwrap()["properties"]["count"]["type"],
        "integer"
    );
    assert_eq!(
        document(&imported, "lib.mutation.add_book", json!({"input": {}})),
        "mutation AddBook($input: BookInput!) { addBook(input: $input) { id title genre pages \
         rating author { name born } } }"
    );
}

#[test]
fn introspection_json_gives_the_same_tools_as_sdl() {
    let json: Value = serde_json::from_str(&fixture("library.introspection.json")).unwrap();
    let from_json =
        import_schema(&SchemaInput::IntrospectionJson(json.clone()), &opts("lib")).unwrap();
    let from_sdl = library_from_sdl();
    let defs = |i: &Imported| i.tools.iter().map(|t| t.def.clone()).collect::<Vec<_>>();
    assert_eq!(defs(&from_json), defs(&from_sdl));
    assert_eq!(from_json.operations, from_sdl.operations);
    // The bare `{"__schema": ...}` form works too.
    let bare = import_schema(
        &SchemaInput::IntrospectionJson(json["data"].clone()),
        &opts("lib"),
    )
    .unwrap();
    assert_eq!(defs(&bare), defs(&from_sdl));
}

#[test]
fn invalid_sdl_names_the_location() {
    let sdl = "type Query {\n  ok: Int\n  broken(: Int\n}\n";
    let err = import_schema(&SchemaInput::Sdl(sdl.into()), &opts("x")).unwrap_err();
    match &err {
        GraphqlError::Syntax { line, .. } => assert_eq!(*line, 3),
        other => panic!("expected a syntax error, got {other}"),
    }
    assert!(err.to_string().contains("line 3"), "{err}");
}

#[test]
fn lenient_schema_problems_are_warnings() {
    let sdl = "type Query { a: Int a: Int b(x: Int!): String }";
    let imported = import_schema(&SchemaInput::Sdl(sdl.into()), &opts("x")).unwrap();
    assert_eq!(imported.tools.len(), 2);
    assert_eq!(imported.warnings.len(), 1);
    assert!(
        imported.warnings[0].contains("duplicate"),
        "{:?}",
        imported.warnings
    );
    assert!(
        imported.warnings[0].starts_with("schema.graphql:1:"),
        "{:?}",
        imported.warnings
    );
}

#[test]
fn wrong_introspection_shapes_are_refused() {
    for bad in [
        json!({"data": {"types": []}}),
        json!([1, 2]),
        json!({"__schema": {"queryType": {"name": "Q"}}}),
        json!({"__schema": {"queryType": null, "types": "nope", "directives": []}}),
    ] {
        let err =
            import_schema(&SchemaInput::IntrospectionJson(bad.clone()), &opts("x")).unwrap_err();
        assert!(
            matches!(err, GraphqlError::Introspection(_)),
            "{bad}: {err}"
        );
    }
}

#[test]
fn endpoint_input_needs_the_async_importer() {
    let err = import_schema(
        &SchemaInput::Endpoint {
            url: "http://127.0.0.1:1/graphql".into(),
        },
        &opts("x"),
    )
    .unwrap_err();
    assert!(matches!(err, GraphqlError::EndpointNeedsAsync));
}

#[test]
fn missing_endpoint_is_a_configuration_error() {
    let err = import_schema(
        &SchemaInput::Sdl("type Query { a: Int }".into()),
        &GraphqlOptions::new("x", ""),
    )
    .unwrap_err();
    assert!(matches!(err, GraphqlError::Config(_)), "{err}");
}
