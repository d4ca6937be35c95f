//! Who a person is according to the company's identity (an OpenID Connect provider or an
//! authenticating proxy), and the one rule that turns their groups into a role
//! ([`RoleMapping::role_for`], issue #54). Pure: no I/O.

use super::{Role, UserName, ValidationError};

/// A person as the identity provider or the proxy vouched for them: the name (from the
/// configured claim or header) and their groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalIdentity {
    /// Where it came from (`oidc` or `proxy`), for the audit log.
    pub source: &'static str,
    /// The sign-in name, as the provider gave it (checked by [`UserName::parse`] at sign-in).
    pub name: String,
    /// The groups the provider listed (a claim or a header), as given.
    pub groups: Vec<String>,
}

/// How groups become a role: `group → role` rules and an optional role for everyone else.
/// Configured as `sre-admins=admin,sre-reviewers=reviewer` (`--oidc-role-map`) and
/// `--oidc-default-role`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleMapping {
    /// `(group, role)` in the order given; group names compare exactly (case-sensitive, as
    /// providers send them).
    pub rules: Vec<(String, Role)>,
    /// The role of a person none of whose groups has a rule; `None`: such a person is refused.
    pub default: Option<Role>,
}

/// Why a person the provider vouched for may not sign in. The `Display` text is shown on the
/// sign-in page and written to the audit log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// None of the person's groups maps to a role and there is no default role.
    #[error(
        "your account ({name}) is in none of the groups that give access to IncidentMind \
         ({known}); your groups: {groups}. Ask an administrator to add you to one of them"
    )]
    NoRole {
        /// The person's name.
        name: String,
        /// The groups with a rule, comma-separated.
        known: String,
        /// The person's groups, comma-separated, or `none`.
        groups: String,
    },
    /// The provider's name for the person is not a valid user name here.
    #[error("the name the identity provider gave ({name:?}) cannot be used here: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },
    /// The account exists and an administrator disabled it.
    #[error("the account {name} is disabled; ask an administrator to enable it")]
    Disabled {
        /// The account's name.
        name: String,
    },
}

impl RoleMapping {
    /// Parses `group=role` pairs separated by commas (spaces around each part ignored; an
    /// empty text gives no rules) and the default role (empty: none).
    ///
    /// # Errors
    /// [`ValidationError`] on `role_map` for a pair without `=`, an empty group or an unknown
    /// role; on `role` for an unknown default role.
    pub fn parse(map: &str, default: &str) -> Result<Self, ValidationError> {
        let mut rules = Vec::new();
        for pair in map.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((group, role)) = pair.rsplit_once('=') else {
                return Err(ValidationError::new(
                    "role_map",
                    format!("'{pair}' is not group=role (e.g. sre-admins=admin)"),
                ));
            };
            let group = group.trim();
            if group.is_empty() {
                return Err(ValidationError::new(
                    "role_map",
                    format!("'{pair}' names no group"),
                ));
            }
            let role =
                Role::parse(role).map_err(|e| ValidationError::new("role_map", e.message))?;
            rules.push((group.to_string(), role));
        }
        let default = match default.trim() {
            "" => None,
            d => Some(Role::parse(d)?),
        };
        Ok(Self { rules, default })
    }

    /// The role of a person with `groups`: the highest role any of their groups maps to, else
    /// the default role.
    ///
    /// # Errors
    /// [`Refusal::NoRole`] when no group maps and there is no default; [`Refusal::BadName`]
    /// when the name is not a valid [`UserName`].
    pub fn role_for(&self, who: &ExternalIdentity) -> Result<(UserName, Role), Refusal> {
        let name = UserName::parse(&who.name).map_err(|e| Refusal::BadName {
            name: who.name.clone(),
            reason: e.message,
        })?;
        let mapped = self
            .rules
            .iter()
            .filter(|(g, _)| who.groups.iter().any(|have| have == g))
            .map(|(_, r)| *r)
            .max();
        match mapped.or(self.default) {
            Some(role) => Ok((name, role)),
            None => Err(Refusal::NoRole {
                name: name.as_str().to_string(),
                known: if self.rules.is_empty() {
                    "no group is configured".into()
                } else {
                    self.rules
                        .iter()
                        .map(|(g, _)| g.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                groups: if who.groups.is_empty() {
                    "none".into()
                } else {
                    who.groups.join(", ")
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(groups: &[&str]) -> ExternalIdentity {
        ExternalIdentity {
            source: "oidc",
            name: "vera@example.org".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn the_highest_mapped_role_wins_and_others_get_the_default_or_are_refused() {
        let map = RoleMapping::parse("sre-admins=admin, sre-reviewers = reviewer", "").unwrap();
        let role = |g: &[&str]| map.role_for(&who(g)).map(|(_, r)| r);
        assert_eq!(role(&["sre-reviewers", "sre-admins"]), Ok(Role::Admin));
        assert_eq!(role(&["staff", "sre-reviewers"]), Ok(Role::Reviewer));
        let refused = role(&["staff"]).unwrap_err();
        assert!(
            refused.to_string().contains("sre-admins, sre-reviewers")
                && refused.to_string().contains("staff"),
            "{refused}"
        );
        let with_default = RoleMapping::parse("sre-admins=admin", "responder").unwrap();
        assert_eq!(
            with_default.role_for(&who(&[])).map(|(_, r)| r),
            Ok(Role::Responder)
        );
    }

    #[test]
    fn a_bad_mapping_or_name_is_refused_in_words() {
        assert!(RoleMapping::parse("sre-admins", "").is_err());
        assert!(RoleMapping::parse("sre=root", "").is_err());
        assert!(RoleMapping::parse("=admin", "").is_err());
        assert!(RoleMapping::parse("", "boss").is_err());
        let map = RoleMapping::parse("", "responder").unwrap();
        let mut odd = who(&[]);
        odd.name = "Vera Lynn".into();
        assert!(matches!(map.role_for(&odd), Err(Refusal::BadName { .. })));
    }
}
