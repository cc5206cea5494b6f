-- Custom tools: saved scripts offered as catalog tools `custom.<id>`.

CREATE TABLE custom_tools (
    id          TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    author      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
