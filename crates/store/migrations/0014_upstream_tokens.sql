-- Tokens persons approved for upstream MCP sources (the authorization-code grant completed
-- through Toolshed's callback), sealed by the caller: after a restart the upstream connects
-- with them instead of asking the person again. One row per source.

CREATE TABLE upstream_tokens (
    source      TEXT PRIMARY KEY,
    sealed      TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
