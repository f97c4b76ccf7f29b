// SPDX-License-Identifier: GPL-2.0
//! The crate's error type for setup failures.
//!
//! Failures of individual test cases are not errors: they become failed
//! [`TestResult`](crate::TestResult)s. [`Error`] is for what prevents a case
//! or a whole MTU run from starting: no device, a QP that cannot be created,
//! a memory region the kernel refuses.

use std::fmt;

/// A setup failure: what was being done, and why it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    msg: String,
}

impl Error {
    /// An error with a plain message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self { msg: msg.into() }
    }

    /// An error for `what` caused by `err`, with `err`'s whole source chain
    /// (sideway's errors carry the errno only in their source).
    pub fn caused(what: &str, err: &(dyn std::error::Error + 'static)) -> Self {
        let mut msg = format!("{what}: {err}");
        let mut source = err.source();
        while let Some(cause) = source {
            msg.push_str(": ");
            msg.push_str(&cause.to_string());
            source = cause.source();
        }
        Self { msg }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

/// Adds "what was being done" to a foreign error, turning it into [`Error`].
pub trait Context<T> {
    /// Wraps the error as [`Error::caused`]`(what, err)`.
    fn context(self, what: &str) -> Result<T, Error>;
}

impl<T, E: std::error::Error + 'static> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, Error> {
        self.map_err(|err| Error::caused(what, &err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[derive(Debug)]
    struct Outer(io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("failed to create queue pair")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn context_includes_the_source_chain() {
        let res: Result<(), Outer> = Err(Outer(io::Error::from_raw_os_error(libc::EINVAL)));
        let err = res.context("create QP A").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("create QP A: failed to create queue pair: "),
            "{text}"
        );
        assert!(text.contains("Invalid argument"), "{text}");
    }
}
