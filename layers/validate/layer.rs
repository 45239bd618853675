use tower_layer::Layer;

use super::Validate;

/// Applies [`Validate`] to a service: strict schema and runtime checks of tool arguments.
///
/// It carries no configuration; the compiled schemas are shared by every instance.
#[derive(Clone, Copy, Debug, Default)]
pub struct ValidateLayer {
    _priv: (),
}

impl ValidateLayer {
    pub const fn new() -> Self {
        Self { _priv: () }
    }
}

impl<S> Layer<S> for ValidateLayer {
    type Service = Validate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Validate::new(inner)
    }
}
