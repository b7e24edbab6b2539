//! The one shutdown signal of a daemon, after tokio's mini-redis: a [`ShutdownTrigger`] owned by whoever stops the
//! daemon, and a [`Shutdown`] clone held by every task (listener, stream, follower) that must stop with it. A
//! `watch` channel carries the signal, so a task that subscribes late still sees it, and a dropped trigger counts
//! as a shutdown (nothing could ever stop the task otherwise).
//!
//! [`wait_for_signal`] is the daemons' one handling of `SIGINT`/`SIGTERM`.

use tokio::sync::watch;

/// Fires the shutdown of every [`Shutdown`] made from it.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// A task's view of the daemon's shutdown. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A new trigger and the signal it fires.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Shutdown(rx))
    }

    /// A signal that never fires (for servers without a shutdown, and tests).
    pub fn never() -> Shutdown {
        let (tx, rx) = watch::channel(false);
        // The sender is leaked on purpose: a dropped trigger would count as a shutdown.
        std::mem::forget(tx);
        Shutdown(rx)
    }

    /// The signal carried by an existing `watch` channel of `bool` (true = shut down), for code that still passes
    /// the raw receiver.
    pub fn from_watch(rx: watch::Receiver<bool>) -> Shutdown {
        Shutdown(rx)
    }

    /// The raw receiver (true once shut down).
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.0.clone()
    }

    /// Whether the shutdown has fired (or its trigger is gone).
    pub fn is_shutdown(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Resolves once the shutdown fires or the trigger is dropped. Cancel-safe.
    pub async fn recv(&mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }

    /// [`Shutdown::recv`] on a clone, as an owned future (for `select!` arms and graceful-shutdown hooks).
    pub fn signalled(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut me = self.clone();
        async move { me.recv().await }
    }
}

impl ShutdownTrigger {
    /// Fires the shutdown. Idempotent.
    pub fn fire(&self) {
        self.0.send_replace(true);
    }

    /// Another signal fired by this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }

    /// The raw receiver (true once shut down), for code that still takes a `watch::Receiver<bool>`.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

/// Resolves on `SIGINT` (Ctrl-C) or `SIGTERM` (only Ctrl-C where there are no Unix signals, or when the `SIGTERM`
/// handler cannot be installed).
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_sees_the_shutdown() {
        let (trigger, shutdown) = Shutdown::new();
        let mut late = shutdown.clone();
        assert!(!shutdown.is_shutdown());
        trigger.fire();
        late.recv().await;
        assert!(shutdown.is_shutdown());
        let mut after = trigger.subscribe();
        after.recv().await;
    }

    #[tokio::test]
    async fn a_dropped_trigger_shuts_down() {
        let (trigger, mut shutdown) = Shutdown::new();
        drop(trigger);
        shutdown.recv().await;
        assert!(shutdown.is_shutdown());
        let never = Shutdown::never();
        assert!(!never.is_shutdown());
    }
}
