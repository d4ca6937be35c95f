-- Issue #54: accounts that can be closed, and users from the company's identity.
-- users.source: where the account came from (`local`: `user add`; `oidc`: an OpenID Connect
--   sign-in; `proxy`: an authenticating proxy's header), shown on the admin page.
-- users.disabled_at: when an admin disabled the account (NULL: enabled); a disabled user's
--   sessions and tokens stop working at once.
-- users.generation: moved by every change that must end the user's sessions (password change,
--   disable, a role change from claims); a session remembers the generation it was made under
--   and is refused once it differs, on every instance.
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local';
ALTER TABLE users ADD COLUMN disabled_at TEXT;
ALTER TABLE users ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
-- api_tokens: a name the owner chose, an optional expiry, the last use (written at most once a
-- minute per token) and the revocation instant (NULL: live).
ALTER TABLE api_tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN expires_at TEXT;
ALTER TABLE api_tokens ADD COLUMN last_used_at TEXT;
ALTER TABLE api_tokens ADD COLUMN revoked_at TEXT;
CREATE INDEX api_tokens_user ON api_tokens (user_id);
