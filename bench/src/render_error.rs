//! Why a JSON document the bench wrote cannot be rendered again: a leaf, shared by the
//! Markdown tables (`render.rs`) and the charts (`svg.rs`).

/// Why a document cannot be rendered: the key that is missing or of the wrong type.
#[derive(Debug)]
pub struct RenderError(String);

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not an autobatch-bench JSON document: {}", self.0)
    }
}

impl std::error::Error for RenderError {}

impl RenderError {
    /// The document lacks `what`.
    pub fn new(what: String) -> RenderError {
        RenderError(what)
    }
}
