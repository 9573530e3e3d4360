//! Thread-local settings that hold for the length of one call.

use std::cell::Cell;
use std::thread::LocalKey;

/// Runs `f` with `key` set to `value` on this thread, and restores the value it
/// had afterwards (also when `f` panics).
pub(crate) fn with_cell<T: Copy + 'static, R>(
    key: &'static LocalKey<Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static>(&'static LocalKey<Cell<T>>, T);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|c| c.set(self.1));
        }
    }
    let _restore = Restore(key, key.with(|c| c.replace(value)));
    f()
}
