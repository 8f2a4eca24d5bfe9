//! The keys a [`super::RedisStore`] has open during one command, and the module strings of
//! their names.

use crate::ffi::{Key, RStr, StrRef};

/// A module string for a name: the command's own argument when the bytes are one, one of the
/// module's shared words (`crate::ffi::shared`), else a copy.
pub(super) enum Name<'a> {
    Arg(usize, StrRef<'a>),
    Shared(StrRef<'static>),
    Own(RStr),
}

impl Name<'_> {
    pub fn arg_index(&self) -> Option<usize> {
        match self {
            Name::Arg(i, _) => Some(*i),
            Name::Shared(_) | Name::Own(_) => None,
        }
    }

    pub fn raw(&self) -> StrRef<'_> {
        match self {
            Name::Arg(_, r) | Name::Shared(r) => *r,
            Name::Own(s) => s.as_ref(),
        }
    }
}

pub(super) struct OpenKey<'a> {
    pub name: Name<'a>,
    pub key: Key,
    /// Whether the key existed when the command first opened it.
    pub existed: bool,
}

/// The keys a command has open, in order: the first few inline (an O(1) command opens one to
/// three), more on the heap. Saves an allocation per command.
#[derive(Default)]
pub(super) struct OpenKeys<'a> {
    inline: [Option<OpenKey<'a>>; 3],
    more: Vec<OpenKey<'a>>,
}

impl<'a> OpenKeys<'a> {
    /// The index of the first key for which `f` holds: the inline slots walked directly (the
    /// store asks this several times per command).
    pub fn find(&self, mut f: impl FnMut(&OpenKey<'a>) -> bool) -> Option<usize> {
        for (i, k) in self.inline.iter().enumerate() {
            match k {
                Some(k) if f(k) => return Some(i),
                Some(_) => {}
                None => return None,
            }
        }
        self.more.iter().position(f).map(|i| i + self.inline.len())
    }

    /// Adds a key; its index.
    pub fn push(&mut self, k: OpenKey<'a>) -> usize {
        match self.inline.iter().position(Option::is_none) {
            Some(i) => {
                self.inline[i] = Some(k);
                i
            }
            None => {
                self.more.push(k);
                self.inline.len() + self.more.len() - 1
            }
        }
    }
}

impl<'a> std::ops::Index<usize> for OpenKeys<'a> {
    type Output = OpenKey<'a>;

    fn index(&self, i: usize) -> &OpenKey<'a> {
        match self.inline.get(i) {
            Some(Some(k)) => k,
            _ => &self.more[i - self.inline.len()],
        }
    }
}
