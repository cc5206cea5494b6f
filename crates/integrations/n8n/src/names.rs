//! One n8n namespace: the imported operations take the hand-written tools' convention and
//! approval rule, so that an agent sees `n8n.<resources>.<verb>` everywhere.
//!
//! - **Names.** The tag of an operation becomes its plural resource (`workflow` →
//!   `workflows`, `credential` → `credentials`, `data_table` → `data_tables`), and the
//!   resource's own words leave the operation name (`create_workflow` → `create`,
//!   `get_workflow_history` → `get_history`, `get_workflows` → `list`, `delete_tag` →
//!   `delete`). Words that only name path parameters (`id`) and dangling prepositions go too
//!   (`add_users_to_project` → `add_users`).
//! - **Approval.** As for the hand-written tools: reads are read-only; `DELETE` and the
//!   operations in [`DESTRUCTIVE`] (they overwrite or hand away data) are destructive; every
//!   other write is a plain write. An imported `publish` therefore waits for confirmation
//!   exactly like the hand-written `activate`.

use std::collections::HashMap;

use serde_json::{json, Value};
use toolshed_core::path::to_segment;
use toolshed_core::{Annotations, ToolPath};

/// Singular tags of n8n's document and their plural resource names.
const PLURALS: &[(&str, &str)] = &[
    ("workflow", "workflows"),
    ("credential", "credentials"),
    ("data_table", "data_tables"),
    ("user", "users"),
    ("role", "roles"),
    ("community_package", "community_packages"),
    ("role_mapping_rule", "role_mapping_rules"),
    ("node_type_policy", "node_type_policies"),
    ("n8n_package", "packages"),
    ("evaluation", "evaluations"),
];

/// Non-`DELETE` operations (`METHOD /path`) that overwrite or hand away data.
pub const DESTRUCTIVE: &[&str] = &[
    "PUT /credentials/{credentialId}/transfer",
    "PUT /workflows/{workflowId}/transfer",
    "POST /source-control/pull",
    "POST /n8n-packages/import",
    "POST /promotions/connections/{promotionConnectionId}/apply",
    "POST /promotions/connections/{promotionConnectionId}/apply/continue",
    "POST /executions/stop",
    "PUT /node-type-policies/instance",
    "PUT /settings/security-policy",
];

/// Words left out at the end of an operation name.
const DANGLING: &[&str] = &["to", "from", "in", "of", "for", "id", "by"];

/// The document with every operation's tag and `operationId` set to its name under the one
/// convention (so the importer names it `n8n.<resources>.<verb>`), and the approval class of
/// each resulting tool path.
pub fn rewrite(doc: &Value, ns: &str) -> (Value, HashMap<String, Annotations>) {
    let mut doc = doc.clone();
    let mut classes = HashMap::new();
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return (doc, classes);
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !matches!(method.as_str(), "get" | "put" | "post" | "delete" | "patch") {
                continue;
            }
            let Some(op) = op.as_object_mut() else {
                continue;
            };
            let tag = op
                .get("tags")
                .and_then(Value::as_array)
                .and_then(|t| t.iter().find_map(Value::as_str))
                .map(to_segment)
                .or_else(|| {
                    path.split('/')
                        .find(|s| !s.is_empty() && !s.starts_with('{'))
                        .map(to_segment)
                })
                .unwrap_or_else(|| "default".into());
            let mut op_seg = match op.get("operationId").and_then(Value::as_str) {
                Some(id) => to_segment(id),
                None => to_segment(&format!("{method}_{path}")),
            };
            if let Some(rest) = op_seg.strip_prefix(&format!("{tag}_")) {
                if !rest.is_empty() {
                    op_seg = rest.to_string();
                }
            }
            let Ok(old) = ToolPath::parse(&format!("{ns}.{tag}.{op_seg}")) else {
                continue;
            };
            let Some(mut new) = consistent_path(&old, path.ends_with('}')) else {
                continue;
            };
            if !taken.insert(new.clone()) {
                // Two operations shortened to one name: this one keeps its own words.
                new = format!("{ns}.{}.{op_seg}", new.split('.').nth(1).unwrap_or(&tag));
                taken.insert(new.clone());
            }
            let mut parts = new.splitn(3, '.').skip(1);
            let (resource, verb) = (
                parts.next().unwrap_or(&tag),
                parts.next().unwrap_or(&op_seg),
            );
            op.insert("tags".into(), json!([resource]));
            op.insert("operationId".into(), json!(verb));
            classes.insert(new.clone(), annotations(method, path));
        }
    }
    (doc, classes)
}

/// The path of an imported tool under the one convention (`one_item`: the operation's URL
/// ends in a parameter, so a bare `get` reads one item rather than listing); `None` when the
/// path is not `n8n.<tag>.<op>`.
pub fn consistent_path(path: &ToolPath, one_item: bool) -> Option<String> {
    let mut parts = path.as_str().split('.');
    let (ns, tag, op) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let resource = PLURALS
        .iter()
        .find(|(singular, _)| *singular == tag)
        .map_or(tag, |(_, plural)| plural);
    Some(format!(
        "{ns}.{resource}.{}",
        verb(tag, resource, op, one_item)
    ))
}

/// The approval class of an imported operation (`method` lower case, `path` as in the
/// document).
pub fn annotations(method: &str, path: &str) -> Annotations {
    let key = format!("{} {path}", method.to_ascii_uppercase());
    match method {
        "get" | "head" | "options" => Annotations::READ_ONLY,
        "delete" => Annotations {
            idempotent: true,
            ..Annotations::DESTRUCTIVE
        },
        _ if DESTRUCTIVE.contains(&key.as_str()) => Annotations::DESTRUCTIVE,
        "put" => Annotations {
            idempotent: true,
            ..Annotations::WRITE
        },
        _ => Annotations::WRITE,
    }
}

/// `op` without the resource's words (singular or plural) and dangling words.
fn verb(tag: &str, resource: &str, op: &str, one_item: bool) -> String {
    let singular = tag
        .strip_suffix('s')
        .filter(|_| tag == resource)
        .unwrap_or(tag);
    let mut words: Vec<&str> = op.split('_').collect();
    for form in [resource, singular] {
        let form: Vec<&str> = form.split('_').collect();
        if let Some(at) = words.windows(form.len()).position(|w| w == form.as_slice()) {
            words.drain(at..at + form.len());
            break;
        }
    }
    while words.len() > 1 && DANGLING.contains(words.last().expect("not empty")) {
        words.pop();
    }
    match words.as_slice() {
        [] => op.to_string(),
        ["get"] if !one_item => "list".into(),
        _ => words.join("_"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(p: &str) -> String {
        // The test names end in an id when they read one item.
        let one_item = ["_id", "get_tag", "get_workflow"]
            .iter()
            .any(|s| p.ends_with(s));
        consistent_path(&ToolPath::parse(p).unwrap(), one_item).unwrap()
    }

    #[test]
    fn imported_names_follow_the_hand_written_convention() {
        for (old, new) in [
            ("n8n.workflow.publish_workflow", "n8n.workflows.publish"),
            (
                "n8n.workflow.get_workflow_history",
                "n8n.workflows.get_history",
            ),
            ("n8n.workflow.get_workflows", "n8n.workflows.list"),
            (
                "n8n.workflow.update_workflow_tags",
                "n8n.workflows.update_tags",
            ),
            ("n8n.credential.create_credential", "n8n.credentials.create"),
            ("n8n.credential.test_credential", "n8n.credentials.test"),
            (
                "n8n.data_table.create_data_table_column",
                "n8n.data_tables.create_column",
            ),
            (
                "n8n.data_table.upsert_data_table_row",
                "n8n.data_tables.upsert_row",
            ),
            ("n8n.data_table.list_data_tables", "n8n.data_tables.list"),
            ("n8n.tags.create_tag", "n8n.tags.create"),
            ("n8n.tags.get_tags", "n8n.tags.list"),
            ("n8n.tags.get_tag", "n8n.tags.get"),
            (
                "n8n.projects.add_users_to_project",
                "n8n.projects.add_users",
            ),
            (
                "n8n.projects.delete_user_from_project",
                "n8n.projects.delete_user",
            ),
            (
                "n8n.executions.stop_many_executions",
                "n8n.executions.stop_many",
            ),
            ("n8n.user.get_users_id", "n8n.users.get"),
            ("n8n.user.get_users", "n8n.users.list"),
            ("n8n.role.get_all_roles", "n8n.roles.get_all"),
            ("n8n.variables.create_variable", "n8n.variables.create"),
            ("n8n.audit.post_audit", "n8n.audit.post"),
        ] {
            assert_eq!(renamed(old), new, "{old}");
        }
    }

    #[test]
    fn approval_follows_the_hand_written_rule() {
        assert_eq!(annotations("get", "/workflows"), Annotations::READ_ONLY);
        let publish = annotations("post", "/workflows/{workflowId}/publish");
        assert!(!publish.destructive && !publish.read_only);
        assert!(annotations("delete", "/tags/{tagId}").destructive);
        assert!(annotations("put", "/workflows/{workflowId}/transfer").destructive);
        assert!(!annotations("put", "/tags/{tagId}").destructive);
    }
}
