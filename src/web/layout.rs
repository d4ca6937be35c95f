//! The base layout every page extends (`templates/base.html`): the signed-in user, the asset
//! versions and the navigation. A leaf of `web/`: pages, error pages and handlers use it, it
//! uses nothing of theirs.

use crate::store::users::User;

/// What the base layout needs on every page.
pub struct Layout {
    /// Signed-in user's name and role, if any.
    pub user: Option<(String, String)>,
    /// Cache-busting versions of the stylesheet and script.
    pub css_v: String,
    /// See `css_v` (`tz.js`).
    pub js_v: String,
    /// See `css_v` (`app.js`: busy buttons and upload progress).
    pub app_js_v: String,
    /// Page title.
    pub title: String,
    /// Which nav entry is the current page (`incidents`, `new`, `memories`, `insights`, `review`,
    /// `integrations`, `profile`; empty for none), marked `aria-current="page"`.
    pub current: &'static str,
}

impl Layout {
    /// Layout for `user` (none on sign-in and error pages) with a page title.
    pub fn new(user: Option<&User>, title: impl Into<String>) -> Self {
        Self {
            user: user.map(|u| (u.name.clone(), u.role.to_string())),
            css_v: super::assets::version("app.css"),
            js_v: super::assets::version("tz.js"),
            app_js_v: super::assets::version("app.js"),
            title: title.into(),
            current: "",
        }
    }

    /// Marks nav entry `current` as the current page.
    pub fn with_current(mut self, current: &'static str) -> Self {
        self.current = current;
        self
    }

    /// `aria-current="page"` when `entry` is the current page (for the nav links).
    pub fn aria(&self, entry: &str) -> &'static str {
        if self.current == entry {
            "page"
        } else {
            "false"
        }
    }

    /// Whether the signed-in user may confirm post-mortems (shows the review queue in the nav).
    pub fn is_reviewer(&self) -> bool {
        matches!(&self.user, Some((_, role)) if role == "reviewer" || role == "admin")
    }
}
