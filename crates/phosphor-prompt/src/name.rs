//! Profile name validation: a name is a single folder name, so it can never lead outside the profile folders.
//! The rule itself is `phosphor-base`'s ([`check_profile_name`]), shared with configuration loading.

pub use phosphor_base::config::MAX_PROFILE_NAME_LEN;
use phosphor_base::config::check_profile_name;

use crate::error::{Error, Result};

/// Checks that `name` can name a profile folder: 1 to [`MAX_PROFILE_NAME_LEN`] ASCII letters, digits, `-`,
/// `_` or `.`, and not `.` or `..`. So a name has no path separator, is never absolute and never climbs
/// out of the profile folders.
///
/// # Errors
/// [`Error::InvalidProfileName`], saying what is wrong and what is allowed.
pub fn validate_profile_name(name: &str) -> Result<()> {
    check_profile_name(name).map_err(|reason| Error::InvalidProfileName { name: name.to_owned(), reason })
}
