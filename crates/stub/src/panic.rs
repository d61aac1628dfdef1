//! Catching a panic of a plugin handler, with its message and location, so
//! that the plugin's log and the runtime's error say what went wrong and where.

use std::any::Any;
use std::cell::{Cell, RefCell};
#[cfg(feature = "async")]
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(feature = "async")]
use std::pin::Pin;
use std::sync::Once;
#[cfg(feature = "async")]
use std::task::{Context, Poll};

/// A plugin handler panicked.
///
/// The runtime receives its text as the error of the request; the stub logs it
/// too. If it happens in `configure`, [`Stub::run`](crate::Stub::run) fails
/// with [`Error::HandlerPanicked`](crate::Error::HandlerPanicked).
///
/// ```
/// let panic = nri_stub::HandlerPanic {
///     plugin: "10-annotator".into(),
///     method: "CreateContainer".into(),
///     message: "index out of bounds".into(),
///     location: Some("src/main.rs:42:9".into()),
/// };
/// assert_eq!(
///     panic.to_string(),
///     "plugin 10-annotator panicked in CreateContainer at src/main.rs:42:9: index out of bounds"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "plugin {plugin} panicked in {method}{}: {message}",
    location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default()
)]
pub struct HandlerPanic {
    /// The plugin's full name, `NN-name`.
    pub plugin: String,
    /// The NRI method whose handler panicked, e.g. `CreateContainer`.
    pub method: String,
    /// The panic's message.
    pub message: String,
    /// `file:line:column` of the panic, when known.
    pub location: Option<String>,
}

/// What a caught panic said, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caught {
    pub(crate) message: String,
    pub(crate) location: Option<String>,
}

thread_local! {
    /// Set while a handler is polled on this thread.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// Where the last panic caught on this thread happened.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once, a panic hook that records the location of panics inside
/// handlers (instead of printing them: the stub logs them) and leaves other
/// panics to the hook that was there before.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let location = info.location().map(|l| l.to_string());
                LOCATION.with(|slot| *slot.borrow_mut() = location);
            } else {
                previous(info);
            }
        }));
    });
}

fn message_of(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&'static str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a value that is not text".to_string()
    }
}

/// Runs `future`, turning a panic while it is polled into [`Caught`].
#[cfg(feature = "async")]
pub(crate) fn catching<F: Future>(future: F) -> CatchPanic<F> {
    install_hook();
    CatchPanic {
        inner: Box::pin(future),
    }
}

/// The future of [`catching`].
#[cfg(feature = "async")]
pub(crate) struct CatchPanic<F> {
    inner: Pin<Box<F>>,
}

#[cfg(feature = "async")]
impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, Caught>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match catch(|| self.inner.as_mut().poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(caught) => Poll::Ready(Err(caught)),
        }
    }
}

/// Runs `f`, turning a panic into [`Caught`] (its location recorded by the
/// hook of [`install_hook`], which the caller has installed).
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Caught> {
    let outer = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result.map_err(|payload| Caught {
        message: message_of(payload.as_ref()),
        location: LOCATION.with(|slot| slot.borrow_mut().take()),
    })
}

/// Runs the blocking handler `f`, turning a panic into [`Caught`].
pub(crate) fn catching_blocking<T>(f: impl FnOnce() -> T) -> Result<T, Caught> {
    install_hook();
    catch(f)
}

#[cfg(all(test, feature = "async"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message_and_location() {
        let line = line!() + 1;
        let caught = catching(async { panic!("boom {}", 7) }).await;
        let caught: Caught = match caught {
            Err(caught) => caught,
            Ok(()) => unreachable!("the future panics"),
        };
        assert_eq!(caught.message, "boom 7");
        let location = caught.location.unwrap_or_default();
        assert!(
            location.starts_with(&format!("{}:{line}:", file!())),
            "{location}"
        );
    }

    #[tokio::test]
    async fn static_text_and_other_payloads() {
        let caught = catching(async { std::panic::panic_any(5_u8) }).await;
        assert_eq!(
            caught.map_err(|c| c.message),
            Err::<(), _>("panic with a value that is not text".to_string())
        );
        let caught = catching(async {
            let v: Vec<u8> = Vec::new();
            v[usize::from(v.is_empty())]
        })
        .await;
        assert!(caught.unwrap_err().message.contains("index out of bounds"));
    }

    #[test]
    fn a_blocking_handler_panic_becomes_its_message_and_location() {
        let line = line!() + 1;
        let caught = catching_blocking(|| -> u8 { panic!("blocking {}", 8) });
        let caught = caught.expect_err("the handler panics");
        assert_eq!(caught.message, "blocking 8");
        let location = caught.location.unwrap_or_default();
        assert!(
            location.starts_with(&format!("{}:{line}:", file!())),
            "{location}"
        );
        assert_eq!(catching_blocking(|| 4), Ok(4));
    }

    #[tokio::test]
    async fn no_panic_passes_the_output_through() {
        assert_eq!(catching(async { 3 }).await, Ok(3));
    }
}
