-- Small versioned state documents of plugins (e.g. the n8n verification loop's work items).

CREATE TABLE plugin_state (
    plugin      TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    version     BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (plugin, key)
);
