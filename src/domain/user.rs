//! Accounts: roles and user names.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ValidationError;

/// What a user may do. Ordered: a reviewer can do everything a responder can, an admin
/// everything.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Works incidents: opens, adds evidence, approves simulated actions, resolves.
    Responder,
    /// Also confirms post-mortems and curates memory.
    Reviewer,
    /// Also manages users and integrations.
    Admin,
}

impl Role {
    /// Parses `responder`, `reviewer` or `admin` (case-insensitive).
    ///
    /// # Errors
    /// [`ValidationError`] on `role` for anything else.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "responder" => Ok(Self::Responder),
            "reviewer" => Ok(Self::Reviewer),
            "admin" => Ok(Self::Admin),
            _ => Err(ValidationError::new(
                "role",
                format!("'{s}' is not a role; use responder, reviewer or admin"),
            )),
        }
    }

    /// The lower-case name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Responder => "responder",
            Self::Reviewer => "reviewer",
            Self::Admin => "admin",
        }
    }

    /// Whether this role includes the permissions of `needed`.
    pub fn includes(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A user name: 1–64 characters of ASCII letters, digits, `.`, `_`, `-`, `@`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserName(String);

impl UserName {
    /// Validates a user name.
    ///
    /// # Errors
    /// [`ValidationError`] on `name`.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        let s = s.trim();
        if s.is_empty() || s.len() > 64 {
            return Err(ValidationError::new("name", "must be 1 to 64 characters"));
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
        {
            return Err(ValidationError::new(
                "name",
                "may contain only ASCII letters, digits, '.', '_', '-' and '@'",
            ));
        }
        Ok(Self(s.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_by_permission() {
        assert!(Role::Admin.includes(Role::Reviewer));
        assert!(Role::Reviewer.includes(Role::Responder));
        assert!(!Role::Responder.includes(Role::Reviewer));
        assert_eq!(Role::parse("Reviewer").unwrap(), Role::Reviewer);
        assert!(Role::parse("root").is_err());
    }

    #[test]
    fn user_names_are_restricted() {
        assert!(UserName::parse("alice.s@example").is_ok());
        assert!(UserName::parse("al ice").is_err());
        assert!(UserName::parse("").is_err());
    }
}
