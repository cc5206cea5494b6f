-- Each principal's own grants at per-user connections (sources with `oauth2_user`
-- credentials), sealed, and the sign-in requests (`/connect`) that create them.

CREATE TABLE grants (
    principal   TEXT NOT NULL,
    connection  TEXT NOT NULL,
    sealed      TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    expires_at  BIGINT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (principal, connection)
);

-- A link handed out in a paused call: the nonce (stored as its SHA-256) is the credential of
-- the browser that opens it; `state` (its SHA-256) binds the provider's answer to it.
CREATE TABLE connect_requests (
    nonce_hash    TEXT PRIMARY KEY,
    principal     TEXT NOT NULL,
    connection    TEXT NOT NULL,
    execution_id  TEXT NOT NULL,
    wait_id       TEXT NOT NULL,
    state_hash    TEXT,
    verifier      TEXT,
    expires_at    BIGINT NOT NULL,
    used          BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX connect_requests_state ON connect_requests (state_hash);
