-- Virtual MCP servers defined at runtime (`servers.put`), beside `[[servers]]` of the
-- configuration: the definition as JSON, served at /mcp/servers/{name}.

CREATE TABLE virtual_servers (
    name        TEXT PRIMARY KEY,
    definition  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
