//! The tool-retrieval sets' format, read one way by every bench that measures on them.
//!
//! A set is a folder holding `tools.jsonl`, `queries.jsonl` and `qrels.tsv`
//! (`scripts/retrieval-sets.sh` writes them). Sets made elsewhere vary in small ways, and a
//! reader that skipped what it did not expect would measure a different catalog without a
//! word, so this one accepts the variants in use and says what it could not read:
//!
//! - a tool is `{id, name, description, input_schema}`; the schema may be under `inputSchema`
//!   (MCP) or `parameters` (OpenAI and BFCL function definitions), and BFCL's `"type": "dict"`
//!   is read as `"object"` at every depth; a tool without `id` takes its `name` as id; OpenAI's
//!   `{"type": "function", "function": {name, description, parameters}}` is read from its
//!   `function`;
//! - a query is `{id, text}`, or `{id, query}`;
//! - `qrels.tsv` may start with a header row or not, and its rows are `query tool`,
//!   `query tool relevance` or TREC's `query 0 tool relevance`, split by tabs (or by spaces when
//!   a line has no tab); a relevance of 0 or less is not relevant.
//!
//! A line that is not JSON, or a row without what it needs, is an error naming the file and the
//! line.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What could not be read, and where.
#[derive(Debug)]
pub struct SetError {
    /// The file.
    pub path: PathBuf,
    /// Its line, from 1; 0 when the file as a whole could not be read.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(
                f,
                "{} line {}: {}",
                self.path.display(),
                self.line,
                self.message
            )
        }
    }
}

impl std::error::Error for SetError {}

/// One tool of a set.
#[derive(Debug, Clone)]
pub struct SetTool {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The input schema, `"dict"` types read as `"object"`; `None` when the row has none.
    pub schema: Option<Value>,
    /// The whole row, for fields some sets add (`api_arguments`, `server`, …).
    pub row: Value,
}

/// One request of a set.
#[derive(Debug, Clone)]
pub struct SetQuery {
    /// Empty when the row has none (a list of requests to time, not to judge).
    pub id: String,
    pub text: String,
}

/// A set's judgements: each query's relevant tool ids, and what was left out.
#[derive(Debug, Default)]
pub struct Qrels {
    pub relevant: HashMap<String, HashSet<String>>,
    /// Rows whose relevance was 0 or less.
    pub not_relevant: usize,
}

/// A whole set.
#[derive(Debug)]
pub struct RetrievalSet {
    pub tools: Vec<SetTool>,
    pub queries: Vec<SetQuery>,
    pub qrels: Qrels,
}

impl RetrievalSet {
    /// Reads `dir`'s three files.
    pub fn read(dir: &Path) -> Result<RetrievalSet, SetError> {
        Ok(RetrievalSet {
            tools: read_tools(&dir.join("tools.jsonl"))?,
            queries: read_queries(&dir.join("queries.jsonl"))?,
            qrels: read_qrels(&dir.join("qrels.tsv"))?,
        })
    }
}

fn read_text(path: &Path) -> Result<String, SetError> {
    std::fs::read_to_string(path).map_err(|e| SetError {
        path: path.to_path_buf(),
        line: 0,
        message: e.to_string(),
    })
}

/// The JSON rows of a `.jsonl` file with their line numbers; blank lines are skipped.
pub fn read_jsonl(path: &Path) -> Result<Vec<(usize, Value)>, SetError> {
    let text = read_text(path)?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row = serde_json::from_str(line).map_err(|e| SetError {
            path: path.to_path_buf(),
            line: i + 1,
            message: format!("not a JSON object: {e}"),
        })?;
        rows.push((i + 1, row));
    }
    Ok(rows)
}

fn string(row: &Value, key: &str) -> Option<String> {
    match row.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A tool row's input schema, wherever the row keeps it, with `"dict"` read as `"object"`.
pub fn tool_schema(row: &Value) -> Option<Value> {
    let schema = ["input_schema", "inputSchema", "parameters"]
        .iter()
        .find_map(|key| row.get(*key).filter(|v| v.is_object()))?;
    let mut schema = schema.clone();
    dict_as_object(&mut schema);
    Some(schema)
}

fn dict_as_object(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("dict") {
                map.insert("type".into(), Value::String("object".into()));
            }
            map.values_mut().for_each(dict_as_object);
        }
        Value::Array(items) => items.iter_mut().for_each(dict_as_object),
        _ => {}
    }
}

/// Reads a `tools.jsonl`.
pub fn read_tools(path: &Path) -> Result<Vec<SetTool>, SetError> {
    read_jsonl(path)?
        .into_iter()
        .map(|(line, row)| {
            tool_of(row).map_err(|message| SetError {
                path: path.to_path_buf(),
                line,
                message,
            })
        })
        .collect()
}

/// One `tools.jsonl` row.
pub fn tool_of(row: Value) -> Result<SetTool, String> {
    // OpenAI's wrapping: the definition is the row's `function`.
    let def = row
        .get("function")
        .filter(|f| f.is_object())
        .unwrap_or(&row);
    let name = string(def, "name").unwrap_or_default();
    let id = string(&row, "id").unwrap_or_else(|| name.clone());
    if id.is_empty() {
        return Err("a tool needs an \"id\" or a \"name\"".into());
    }
    Ok(SetTool {
        description: string(def, "description").unwrap_or_default(),
        schema: tool_schema(def),
        name,
        id,
        row,
    })
}

/// Reads a `queries.jsonl`.
pub fn read_queries(path: &Path) -> Result<Vec<SetQuery>, SetError> {
    read_jsonl(path)?
        .into_iter()
        .map(|(line, row)| {
            let error = |message: &str| SetError {
                path: path.to_path_buf(),
                line,
                message: message.into(),
            };
            Ok(SetQuery {
                id: string(&row, "id").unwrap_or_default(),
                text: string(&row, "text")
                    .or_else(|| string(&row, "query"))
                    .ok_or_else(|| error("a query needs its \"text\" (or \"query\")"))?,
            })
        })
        .collect()
}

/// Reads a `qrels.tsv`.
pub fn read_qrels(path: &Path) -> Result<Qrels, SetError> {
    let text = read_text(path)?;
    let mut qrels = Qrels::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = if line.contains('\t') {
            line.split('\t').map(str::trim).collect()
        } else {
            line.split_whitespace().collect()
        };
        let (query, tool, relevance) = match cols[..] {
            [q, t] => (q, t, None),
            [q, t, r] => (q, t, Some(r)),
            [q, _, t, r] => (q, t, Some(r)),
            _ => {
                return Err(SetError {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: format!(
                        "expected query, tool and relevance separated by tabs, found {} columns",
                        cols.len()
                    ),
                })
            }
        };
        let relevance = match relevance.map(str::parse::<f64>) {
            None => 1.0,
            Some(Ok(r)) => r,
            // The header names its columns.
            Some(Err(_)) if qrels.relevant.is_empty() && qrels.not_relevant == 0 => continue,
            Some(Err(_)) => {
                return Err(SetError {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: format!("the relevance {:?} is not a number", cols[cols.len() - 1]),
                })
            }
        };
        if i == 0 && cols.len() == 2 && looks_like_header(query, tool) {
            continue;
        }
        if relevance > 0.0 {
            qrels
                .relevant
                .entry(query.to_string())
                .or_default()
                .insert(tool.to_string());
        } else {
            qrels.not_relevant += 1;
        }
    }
    Ok(qrels)
}

/// A two-column first row that names its columns (`query_id  tool_id`).
fn looks_like_header(query: &str, tool: &str) -> bool {
    const NAMES: [&str; 8] = [
        "query",
        "query_id",
        "queryid",
        "qid",
        "tool",
        "tool_id",
        "doc_id",
        "corpus_id",
    ];
    let named = |s: &str| NAMES.contains(&s.to_ascii_lowercase().replace('-', "_").as_str());
    named(query) && named(tool)
}

/// Per tool, the index of the first tool with its id. Judgements name ids, and a set may list
/// one id twice (one function defined twice): both tools are searched, and a ranking is judged
/// by ids ([`judged_ranking`]).
pub fn first_of_id<S: AsRef<str>>(ids: &[S]) -> Vec<usize> {
    let mut first: HashMap<&str, usize> = HashMap::new();
    ids.iter()
        .enumerate()
        .map(|(i, id)| *first.entry(id.as_ref()).or_insert(i))
        .collect()
}

/// A ranking of tool indexes as the judgements see it: each tool as the first tool of its id
/// (`first_of_id` from [`first_of_id`]), each id once, in rank order. For a set whose ids are
/// all distinct it is the ranking itself.
pub fn judged_ranking(
    first_of_id: &[usize],
    ranked: impl IntoIterator<Item = usize>,
) -> Vec<usize> {
    let mut seen = HashSet::new();
    ranked
        .into_iter()
        .map(|t| first_of_id[t])
        .filter(|&t| seen.insert(t))
        .collect()
}

/// A set joined up: each query's relevant tools as indexes into `tools`, and what could not
/// be joined.
#[derive(Debug, Default)]
pub struct Judged {
    /// `(query text, relevant tool indexes)`, in the order of `queries.jsonl`.
    pub queries: Vec<(String, HashSet<usize>)>,
    /// Queries no judgement names (not measured).
    pub unjudged: usize,
    /// Judgements naming a tool id that `tools.jsonl` does not hold.
    pub unknown_tools: usize,
}

impl RetrievalSet {
    /// Each judged query with its relevant tools' indexes (the first tool of an id that occurs
    /// twice); a query whose relevant tools are all unknown is not measured.
    pub fn judged(&self) -> Judged {
        let mut by_id: HashMap<&str, usize> = HashMap::new();
        for (i, tool) in self.tools.iter().enumerate() {
            by_id.entry(tool.id.as_str()).or_insert(i);
        }
        let mut judged = Judged::default();
        for query in &self.queries {
            let Some(ids) = self.qrels.relevant.get(&query.id) else {
                judged.unjudged += 1;
                continue;
            };
            let mut relevant = HashSet::new();
            for id in ids {
                match by_id.get(id.as_str()) {
                    Some(&i) => {
                        relevant.insert(i);
                    }
                    None => judged.unknown_tools += 1,
                }
            }
            if !relevant.is_empty() {
                judged.queries.push((query.text.clone(), relevant));
            }
        }
        judged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("retrieval-set-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_schema_is_read_under_each_of_its_keys_and_dict_means_object() {
        let bfcl = json!({"name": "calc_area", "parameters": {"type": "dict", "properties": {
            "shape": {"type": "dict", "properties": {"base": {"type": "integer"}}}}}});
        let tool = tool_of(bfcl).unwrap();
        assert_eq!(tool.id, "calc_area", "the name stands for a missing id");
        let schema = tool.schema.unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["shape"]["type"], "object");
        let mcp = json!({"id": "a", "inputSchema": {"type": "object", "properties": {"q": {}}}});
        assert!(tool_of(mcp).unwrap().schema.unwrap()["properties"]["q"].is_object());
        let plain = json!({"id": "b", "input_schema": {"type": "object"}});
        assert!(tool_of(plain).unwrap().schema.is_some());
        assert!(tool_of(json!({"id": "c"})).unwrap().schema.is_none());
        let openai = json!({"type": "function", "function": {"name": "f", "description": "Does f.",
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}});
        let tool = tool_of(openai).unwrap();
        assert_eq!(
            (tool.id.as_str(), tool.description.as_str()),
            ("f", "Does f.")
        );
        assert!(tool.schema.unwrap()["properties"]["x"].is_object());
        assert!(tool_of(json!({"description": "no id"})).is_err());
    }

    #[test]
    fn qrels_are_read_with_or_without_a_header_in_every_column_layout() {
        let dir = temp_dir("qrels");
        let layouts = [
            "query_id\ttool_id\trelevance\nq1\tt1\t1\nq1\tt2\t0\nq2\tt3\t2\n",
            "q1\tt1\t1\nq1\tt2\t0\nq2\tt3\t1\n",
            "query_id\ttool_id\nq1\tt1\nq2\tt3\n",
            "q1\tt1\nq2\tt3\n",
            "query-id corpus-id\nq1 t1\nq2 t3\n",
            "q1 0 t1 1\nq1 0 t2 0\nq2 Q0 t3 1\n",
            "q1\tt1\t1.0\r\nq2\tt3\t1.0\r\n",
        ];
        for (i, text) in layouts.iter().enumerate() {
            let qrels = read_qrels(&write(&dir, "qrels.tsv", text)).unwrap();
            assert_eq!(qrels.relevant.len(), 2, "layout {i}: {text:?}");
            assert_eq!(
                qrels.relevant["q1"],
                HashSet::from(["t1".to_string()]),
                "layout {i}"
            );
            assert_eq!(
                qrels.relevant["q2"],
                HashSet::from(["t3".to_string()]),
                "layout {i}"
            );
        }
        let first = read_qrels(&write(&dir, "qrels.tsv", "query-1\ttool-1\n")).unwrap();
        assert_eq!(
            first.relevant.len(),
            1,
            "a first row of ids is not a header"
        );
        let bad = read_qrels(&write(&dir, "qrels.tsv", "q1\tt1\t1\nq2\tt3\tyes\n")).unwrap_err();
        assert_eq!(bad.line, 2);
        assert!(bad.to_string().contains("\"yes\" is not a number"), "{bad}");
        let bad = read_qrels(&write(&dir, "qrels.tsv", "q1\tt1\t1\tx\ty\n")).unwrap_err();
        assert!(bad.to_string().contains("5 columns"), "{bad}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_ranking_is_judged_by_ids_each_once() {
        let ids = ["a", "b", "a", "c", "b"];
        let first = first_of_id(&ids);
        assert_eq!(first, [0, 1, 0, 3, 1]);
        // The second "a" (index 2) found first counts as "a"; "a" again and "b" again add
        // nothing, so "c" is the third id of the top five.
        assert_eq!(judged_ranking(&first, [2, 0, 4, 1, 3]), [0, 1, 3]);
        assert_eq!(judged_ranking(&first_of_id(&["x", "y"]), [1, 0]), [1, 0]);
    }

    #[test]
    fn a_set_is_joined_and_says_what_it_could_not_join() {
        let dir = temp_dir("set");
        write(
            &dir,
            "tools.jsonl",
            "{\"id\": \"t1\", \"name\": \"one\"}\n\n{\"name\": \"t2\"}\n",
        );
        write(
            &dir,
            "queries.jsonl",
            "{\"id\": \"q1\", \"text\": \"first\"}\n{\"id\": \"q2\", \"query\": \"second\"}\n{\"id\": \"q3\", \"text\": \"unjudged\"}\n{\"id\": \"q4\", \"text\": \"gone\"}\n",
        );
        write(
            &dir,
            "qrels.tsv",
            "q1\tt1\t1\nq2\tt2\t1\nq2\tt9\t1\nq4\tt8\t1\n",
        );
        let set = RetrievalSet::read(&dir).unwrap();
        let judged = set.judged();
        assert_eq!(
            judged.queries,
            vec![
                ("first".to_string(), HashSet::from([0])),
                ("second".to_string(), HashSet::from([1]))
            ]
        );
        assert_eq!(judged.unjudged, 1);
        assert_eq!(judged.unknown_tools, 2);

        write(
            &dir,
            "queries.jsonl",
            "{\"id\": \"q1\", \"text\": \"ok\"}\n{\"id\": \"q2\", \"text\": \n",
        );
        let bad = RetrievalSet::read(&dir).unwrap_err();
        assert_eq!(bad.line, 2);
        assert!(
            bad.to_string()
                .contains("queries.jsonl line 2: not a JSON object"),
            "{bad}"
        );
        write(&dir, "queries.jsonl", "{\"id\": \"q1\"}\n");
        let bad = RetrievalSet::read(&dir).unwrap_err();
        assert!(bad.to_string().contains("needs its \"text\""), "{bad}");
        std::fs::remove_dir_all(dir).ok();
    }
}
