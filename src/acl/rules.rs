//! Reading a user's ACL rules as the module API describes them (`ACL LIST` without `user
//! <name>`): whether they grant everything, so that no check need be made for the user.

/// True when an ACL description (`ACL LIST` without `user <name>`, as the module API gives
/// it) grants every key with every access and every channel in its root selector: such a
/// user passes every check, so none need be made. Key and channel patterns cannot contain
/// spaces (`ACL SETUSER` refuses them), so the words are unambiguous; the root selector ends
/// where the first `(selector)` starts.
pub fn grants_everything(description: &[u8]) -> bool {
    let root = description.split(|&b| b == b' ').filter(|w| !w.is_empty()).take_while(|w| w[0] != b'(');
    let (mut keys, mut channels) = (false, false);
    for word in root {
        keys |= word == b"~*";
        channels |= word == b"&*";
    }
    keys && channels
}

/// True when an ACL description's root selector grants every command: `+@all` with no later
/// `-` rule (`ACL LIST` writes `+@all` first and then only the exceptions, as `+@all
/// -publish`, so any `-` word after it takes a command, subcommand or category away). A
/// selector's rules only add to the root's, which already has everything.
pub fn grants_every_command(description: &[u8]) -> bool {
    let root = description.split(|&b| b == b' ').filter(|w| !w.is_empty()).take_while(|w| w[0] != b'(');
    let mut all = false;
    for word in root {
        if word == b"+@all" {
            all = true;
        } else if word[0] == b'-' {
            all = false;
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const DESCRIPTIONS: &[(&str, bool)] = &[
        ("on nopass sanitize-payload ~* &* +@all",                        true),
        ("on #5e88 ~* &* -@all +lock.unlock",                             true),
        ("on nopass ~app:* &* +@all",                                     false),
        ("on nopass ~* resetchannels &app:* +@all",                       false),
        ("on nopass %R~* &* +@all",                                       false),
        ("on nopass %R~* %W~* &* +@all",                                  false),
        // Only the root selector counts: a selector's `~*` does not grant the root's checks.
        ("on nopass ~app:* resetchannels -@all (~* &* +@all)",            false),
        ("on nopass ~* &* +@all (~app:* resetchannels +get)",             true),
        ("",                                                              false),
    ];

    #[test]
    fn only_a_root_selector_with_every_key_and_channel_grants_everything() {
        for (d, want) in DESCRIPTIONS {
            assert_eq!(grants_everything(d.as_bytes()), *want, "{d}");
        }
    }

    #[rustfmt::skip]
    const COMMAND_RULES: &[(&str, bool)] = &[
        ("on nopass sanitize-payload ~* &* +@all",                        true),
        ("on nopass ~app:* resetchannels +@all",                          true),
        ("on nopass ~* &* +@all +get",                                    true),
        ("on nopass ~* &* +@all -publish",                                false),
        ("on nopass ~* &* +@all -config|set",                             false),
        ("on nopass ~* &* +@all -@admin -keys -flushdb",                  false),
        ("on #5e88 ~* &* -@all +lock.unlock",                             false),
        ("on nopass ~* &* -@all +@write +@read",                          false),
        ("on nopass ~* &* -@all",                                         false),
        // A later `+@all` grants everything again (the server writes only the last state).
        ("on nopass ~* &* -publish +@all",                                true),
        // Only the root selector counts: a selector adds permissions, never takes them away.
        ("on nopass ~* &* +@all (~x resetchannels -@all +get)",           true),
        ("on nopass ~* &* -@all +get (~* &* +@all)",                      false),
        ("",                                                              false),
    ];

    #[test]
    fn only_a_root_selector_with_all_commands_and_no_later_exception_grants_every_command() {
        for (d, want) in COMMAND_RULES {
            assert_eq!(grants_every_command(d.as_bytes()), *want, "{d}");
        }
    }
}
