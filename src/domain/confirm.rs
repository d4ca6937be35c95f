//! Who may confirm a post-mortem draft (DESIGN.md §1: "Confirm needs the `reviewer` role"): the
//! one rule that the confirm service, the post-mortem page and the incident page's stepper all
//! ask, and what a draft must say before it is confirmed. Pure; each caller words the refusal
//! for its own page or error.

use super::Role;
use super::postmortem::Postmortem;

/// The deployment's confirm policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConfirmPolicy {
    /// Small teams: let the last editor confirm their own draft.
    pub allow_self_confirm: bool,
}

/// Why a person may not confirm a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmRefusal {
    /// Confirming needs the reviewer role.
    NeedsReviewer,
    /// They edited the draft last and self-confirm is off: another reviewer must confirm it.
    OwnEdit,
    /// The draft does not say what set the incident off ([`Postmortem::has_trigger`]).
    NoTrigger,
}

impl ConfirmPolicy {
    /// Whether a person of `role` named `name` may confirm a draft last edited by
    /// `last_editor`: the reviewer role, and (unless [`ConfirmPolicy::allow_self_confirm`]) not
    /// its last editor. `last_editor` is `None` when no draft is known yet (then only the role
    /// counts).
    ///
    /// # Errors
    /// The [`ConfirmRefusal`], the role first.
    pub fn check(
        self,
        role: Role,
        name: &str,
        last_editor: Option<&str>,
    ) -> Result<(), ConfirmRefusal> {
        if !role.includes(Role::Reviewer) {
            return Err(ConfirmRefusal::NeedsReviewer);
        }
        if !self.allow_self_confirm && last_editor == Some(name) {
            return Err(ConfirmRefusal::OwnEdit);
        }
        Ok(())
    }

    /// [`ConfirmPolicy::check`] for a known draft last edited by `last_editor`, then the draft
    /// itself: it must name its trigger. A post-mortem that does not say what set the incident
    /// off teaches nothing about preventing the next one (the Google SRE book's post-mortem
    /// template asks for the trigger beside the root cause).
    ///
    /// # Errors
    /// The [`ConfirmRefusal`]: the role, then the last editor, then the trigger.
    pub fn check_draft(
        self,
        role: Role,
        name: &str,
        draft: &Postmortem,
        last_editor: &str,
    ) -> Result<(), ConfirmRefusal> {
        self.check(role, name, Some(last_editor))?;
        if !draft.has_trigger() {
            return Err(ConfirmRefusal::NoTrigger);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: ConfirmPolicy = ConfirmPolicy {
        allow_self_confirm: false,
    };

    #[test]
    fn a_responder_may_never_confirm() {
        for p in [
            STRICT,
            ConfirmPolicy {
                allow_self_confirm: true,
            },
        ] {
            assert_eq!(
                p.check(Role::Responder, "rita", Some("victor")),
                Err(ConfirmRefusal::NeedsReviewer)
            );
            assert_eq!(
                p.check(Role::Responder, "rita", None),
                Err(ConfirmRefusal::NeedsReviewer)
            );
        }
    }

    #[test]
    fn the_last_editor_may_confirm_only_when_self_confirm_is_allowed() {
        assert_eq!(
            STRICT.check(Role::Reviewer, "victor", Some("victor")),
            Err(ConfirmRefusal::OwnEdit)
        );
        let small_team = ConfirmPolicy {
            allow_self_confirm: true,
        };
        assert_eq!(
            small_team.check(Role::Reviewer, "victor", Some("victor")),
            Ok(())
        );
    }

    #[test]
    fn another_reviewer_or_an_admin_may_confirm() {
        assert_eq!(STRICT.check(Role::Reviewer, "victor", Some("rita")), Ok(()));
        assert_eq!(STRICT.check(Role::Admin, "ada", Some("rita")), Ok(()));
        assert_eq!(STRICT.check(Role::Reviewer, "victor", None), Ok(()));
    }

    #[test]
    fn a_draft_is_confirmed_only_once_it_names_its_trigger() {
        let mut draft = Postmortem {
            trigger: "  ".into(),
            ..Postmortem::default()
        };
        assert_eq!(
            STRICT.check_draft(Role::Reviewer, "victor", &draft, "rita"),
            Err(ConfirmRefusal::NoTrigger)
        );
        draft.trigger = "Unknown — fill in what set it off".into();
        assert_eq!(
            STRICT.check_draft(Role::Reviewer, "victor", &draft, "rita"),
            Err(ConfirmRefusal::NoTrigger),
            "the prompt older drafts carry is not a trigger"
        );
        draft.trigger = "A cron job doubled the batch size at 02:00".into();
        assert_eq!(
            STRICT.check_draft(Role::Reviewer, "victor", &draft, "rita"),
            Ok(())
        );
        assert_eq!(
            STRICT.check_draft(Role::Reviewer, "rita", &draft, "rita"),
            Err(ConfirmRefusal::OwnEdit),
            "the people rules come first"
        );
        assert_eq!(
            STRICT.check_draft(Role::Responder, "sam", &draft, "rita"),
            Err(ConfirmRefusal::NeedsReviewer)
        );
    }
}
