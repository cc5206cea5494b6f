//! End-to-end ranking on a small catalog: realistic queries, filters and counts.

use serde_json::Value;
use toolshed_search::{param_docs_from_schema, Query, SearchDoc, SearchIndex};

fn catalog() -> (Vec<SearchDoc>, SearchIndex) {
    let rows: Vec<Value> =
        serde_json::from_str(include_str!("fixtures/catalog.json")).expect("fixture is valid JSON");
    let docs: Vec<SearchDoc> = rows
        .iter()
        .map(|r| SearchDoc {
            path: r["path"].as_str().unwrap_or_default().into(),
            name: r["name"].as_str().unwrap_or_default().into(),
            description: r["description"].as_str().unwrap_or_default().into(),
            params: param_docs_from_schema(&r["input_schema"]),
        })
        .collect();
    let index = SearchIndex::build(&docs);
    (docs, index)
}

fn top(index: &SearchIndex, docs: &[SearchDoc], text: &str) -> String {
    let r = index.search(&Query::new(text, 5));
    r.hits
        .first()
        .map(|h| docs[h.doc].path.clone())
        .unwrap_or_default()
}

#[test]
fn the_right_tool_wins() {
    let (docs, index) = catalog();
    assert_eq!(index.len(), docs.len());
    for (query, expected) in [
        ("open a new bug report on github", "github.issues.create"),
        (
            "show me the open issues with the label bug",
            "github.issues.list",
        ),
        ("squash and merge PR 42", "github.pulls.merge"),
        (
            "post a message to the #general slack channel",
            "slack.chat.postMessage",
        ),
        (
            "will it rain tomorrow? weather forecast for Paris",
            "weather.forecast.daily",
        ),
        (
            "bill the customer with an invoice",
            "stripe.invoices.create",
        ),
        (
            "give the customer their money back, refund the charge",
            "stripe.refunds.create",
        ),
        ("download my table as a csv file", "tables.rows.export"),
        (
            "where can I park near the Louvre",
            "maps.places.findParking",
        ),
        ("turn this docx into a pdf", "files.pdf.convert"),
        ("findParking", "maps.places.findParking"),
        ("pull_number merge_method", "github.pulls.merge"),
    ] {
        assert_eq!(top(&index, &docs, query), expected, "query {query:?}");
    }
}

#[test]
fn namespace_limits_results_and_empty_query_lists_it() {
    let (docs, index) = catalog();
    let q = Query {
        namespace: Some("github"),
        ..Query::new("create", 10)
    };
    let r = index.search(&q);
    assert_eq!(r.total, 1);
    assert_eq!(docs[r.hits[0].doc].path, "github.issues.create");

    let listing = index.search(&Query {
        namespace: Some("github"),
        ..Query::new("", 2)
    });
    assert_eq!(listing.total, 4);
    let ids: Vec<usize> = listing.hits.iter().map(|h| h.doc).collect();
    assert_eq!(ids, [0, 1], "listing is in doc order, capped by limit");

    let unknown = index.search(&Query {
        namespace: Some("nope"),
        ..Query::new("create", 10)
    });
    assert_eq!(unknown.total, 0);
    assert!(unknown.hits.is_empty());
}

#[test]
fn policy_filter_hides_tools_and_their_count() {
    let (docs, index) = catalog();
    let all = index.search(&Query::new("create", 10));
    assert_eq!(all.total, 3, "three create tools");
    let deny_github = |d: usize| !docs[d].path.starts_with("github.");
    let filtered = index.search(&Query {
        filter: Some(&deny_github),
        ..Query::new("create", 10)
    });
    assert_eq!(filtered.total, 2);
    assert!(filtered
        .hits
        .iter()
        .all(|h| docs[h.doc].path.starts_with("stripe.")));
    let listing = index.search(&Query {
        namespace: Some("github"),
        filter: Some(&deny_github),
        ..Query::new("", 10)
    });
    assert_eq!(listing.total, 0);
}

#[test]
fn total_counts_every_match_beyond_the_limit() {
    let (_, index) = catalog();
    let r = index.search(&Query::new("repository", 1));
    assert_eq!(r.hits.len(), 1);
    assert!(r.total >= 3, "total {}", r.total);
    let scores: Vec<f32> = index
        .search(&Query::new("repository", 10))
        .hits
        .iter()
        .map(|h| h.score)
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn empty_and_garbage_queries_match_nothing() {
    let (_, index) = catalog();
    for text in ["", "   ", "the and of", "zzqxv wqpl", "!!! ???"] {
        let r = index.search(&Query::new(text, 10));
        assert_eq!(r.total, 0, "{text:?}");
        assert!(r.hits.is_empty());
    }
}

#[test]
fn ties_break_by_doc_id() {
    let doc = |path: &str| SearchDoc {
        path: path.into(),
        name: "Same".into(),
        description: "identical words".into(),
        params: vec![],
    };
    let index = SearchIndex::build(&[doc("b.x"), doc("a.x"), doc("c.x")]);
    let r = index.search(&Query::new("identical", 10));
    let ids: Vec<usize> = r.hits.iter().map(|h| h.doc).collect();
    assert_eq!(ids, [0, 1, 2]);
}

#[test]
fn index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SearchIndex>();
}
