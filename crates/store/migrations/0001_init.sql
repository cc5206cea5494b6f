-- Toolshed's schema. Portable between SQLite and PostgreSQL: TEXT ids, BIGINT epoch milliseconds,
-- JSON kept as TEXT.

CREATE TABLE executions (
    id          TEXT PRIMARY KEY,
    principal   TEXT NOT NULL,
    kind        TEXT NOT NULL,
    source      TEXT NOT NULL,
    seed        BIGINT NOT NULL,
    now_ms      BIGINT NOT NULL,
    status      TEXT NOT NULL,
    pending     TEXT,
    journal     TEXT NOT NULL,
    decisions   TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    logs        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    version     BIGINT NOT NULL
);
CREATE INDEX executions_status ON executions (status, expires_at);
CREATE INDEX executions_principal ON executions (principal, status);

CREATE TABLE audit (
    id           TEXT PRIMARY KEY,
    ts           BIGINT NOT NULL,
    principal    TEXT NOT NULL,
    face         TEXT NOT NULL,
    path         TEXT NOT NULL,
    execution_id TEXT,
    args         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    error        TEXT,
    duration_us  BIGINT NOT NULL
);
CREATE INDEX audit_ts ON audit (ts);

CREATE TABLE sources (
    name        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    config      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE dt_tables (
    name        TEXT PRIMARY KEY,
    columns     TEXT NOT NULL,
    next_row_id BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE dt_rows (
    table_name  TEXT NOT NULL,
    id          BIGINT NOT NULL,
    data        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (table_name, id)
);
