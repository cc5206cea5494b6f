-- Principals signed in with an OAuth token, and the roles their newest token granted: an
-- execution a token holder started and someone else resumes (or that is resumed after a
-- restart) runs with its owner's roles.

CREATE TABLE signed_in (
    principal   TEXT PRIMARY KEY,
    roles       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
