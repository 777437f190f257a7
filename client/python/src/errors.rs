//! rig's exceptions, and the mapping from the libraries' typed errors onto them.
//!
//! Hierarchy (all under `rig.RigError`): `ClientError` (no rigd at the socket, no
//! permission, a rigd too old), `Refused` (rigd refused a request: `.reason` is its
//! refusal, snake_case: `"quota"`, `"exhausted"`, `"gpu_rings_refused"`…), `Fault` (the
//! GPU stopped a channel: `.fault` names the RM's code, `.channel` the channel),
//! `Timeout` (work did not complete in time), `Closed` (the object was freed or closed),
//! of which `ClientError`, `Timeout` and `Closed` are also `ConnectionError`,
//! `TimeoutError` and `ValueError`, as Python's own would be;
//! `CubinError` (a cubin rig cannot run), `LaunchError` (a launch's shape or arguments),
//! `ExporterGone` (a shared event's exporter ended before releasing what was waited for).
//! A bad Python argument is a `ValueError` or `TypeError`, as Python's own are; an
//! index past a graph's launches or a kernel's arguments an `IndexError`.
//!
//! Each message is the whole chain of causes, joined with ": ", as rigctl prints it.
//! The libraries' errors forward through `#[error(transparent)]` layers, which hide
//! the inner error from `source()`, so the kind is read by matching the types, not by
//! walking the chain.

use std::error::Error;

use pyo3::{
    create_exception,
    exceptions::{
        PyConnectionError, PyException, PyIndexError, PyKeyError, PyTimeoutError, PyValueError,
    },
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyTuple, PyType},
};
use rig_client::{
    ClientError, channel::ChannelError, event::EventError as SharedError, session::SessionError,
};
use rig_runtime::{
    ComputeError, CopyError, EventError, GraphError, LoadError, MemoryError, RuntimeError,
    ValueError,
};

create_exception!(rig_gpu._rig, RigError, PyException, "Every error of rig.");
create_exception!(
    rig_gpu._rig,
    Refused,
    RigError,
    "rigd refused the request; `reason` names the refusal (snake_case)."
);
create_exception!(
    rig_gpu._rig,
    Fault,
    RigError,
    "The GPU stopped a channel; `fault` names the RM's error, `channel` the channel."
);
create_exception!(
    rig_gpu._rig,
    ExporterGone,
    RigError,
    "A shared event's exporter ended before its work released the value waited for."
);
create_exception!(
    rig_gpu._rig,
    CubinError,
    RigError,
    "A cubin rig cannot load or run."
);
create_exception!(
    rig_gpu._rig,
    LaunchError,
    RigError,
    "A launch's shape or arguments are refused before anything is submitted."
);

/// The exceptions that are also one of Python's own, so that code written against the
/// built-ins catches them: `ClientError` is a `ConnectionError`, `Timeout` a
/// `TimeoutError`, `Closed` a `ValueError` (what Python raises for a closed file).
/// `create_exception!` gives one base only; these are made with `type()` at first use.
struct Twin {
    name: &'static str,
    doc: &'static str,
    builtin: fn(Python<'_>) -> Bound<'_, PyType>,
    made: PyOnceLock<Py<PyType>>,
}

static CLIENT_ERROR: Twin = Twin {
    name: "ClientError",
    doc: "rigd cannot be reached: no daemon at the socket, no permission, a daemon too old. Also a ConnectionError.",
    builtin: |py| py.get_type::<PyConnectionError>(),
    made: PyOnceLock::new(),
};
static TIMEOUT: Twin = Twin {
    name: "Timeout",
    doc: "Work did not complete within the timeout. Also a TimeoutError.",
    builtin: |py| py.get_type::<PyTimeoutError>(),
    made: PyOnceLock::new(),
};
static CLOSED: Twin = Twin {
    name: "Closed",
    doc: "The object was freed or closed. Also a ValueError, as for a closed file.",
    builtin: |py| py.get_type::<PyValueError>(),
    made: PyOnceLock::new(),
};

impl Twin {
    /// The class: `type(name, (RigError, builtin), {...})`, made once.
    fn get<'py>(&'static self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        self.made
            .get_or_try_init(py, || {
                let ns = PyDict::new(py);
                ns.set_item("__doc__", self.doc)?;
                ns.set_item("__module__", "rig_gpu._rig")?;
                let bases = PyTuple::new(py, [py.get_type::<RigError>(), (self.builtin)(py)])?;
                let class = py.get_type::<PyType>().call1((self.name, bases, ns))?;
                Ok(class.cast_into::<PyType>()?.unbind())
            })
            .map(|t| t.bind(py).clone())
    }

    /// An instance with `msg`.
    fn err(&'static self, py: Python<'_>, msg: String) -> PyErr {
        match self.get(py) {
            Ok(t) => PyErr::from_type(t, msg),
            Err(e) => e,
        }
    }
}

/// Adds the exceptions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RigError", py.get_type::<RigError>())?;
    m.add("ClientError", CLIENT_ERROR.get(py)?)?;
    m.add("Refused", py.get_type::<Refused>())?;
    m.add("Fault", py.get_type::<Fault>())?;
    m.add("Timeout", TIMEOUT.get(py)?)?;
    m.add("Closed", CLOSED.get(py)?)?;
    m.add("CubinError", py.get_type::<CubinError>())?;
    m.add("ExporterGone", py.get_type::<ExporterGone>())?;
    m.add("LaunchError", py.get_type::<LaunchError>())?;
    Ok(())
}

/// The message: the error and each of its causes, joined with ": " (a cause whose text
/// repeats the one before is printed once).
fn chain(e: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        let t = s.to_string();
        if parts.last() != Some(&t) {
            parts.push(t);
        }
        next = s.source();
    }
    parts.join(": ")
}

/// What an error becomes in Python.
enum Class {
    Client,
    Refused(String),
    Fault { fault: &'static str, channel: u64 },
    Timeout,
    Closed,
    Cubin,
    Gone,
    NoKernel,
    Index,
    Launch,
    Value,
    Other,
}

/// `CamelCase` → `camel_case` (a refusal kind's name as Python sees it).
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn session(e: &SessionError) -> Class {
    match e {
        SessionError::Client(_) => Class::Client,
        SessionError::Refused { kind, .. } => Class::Refused(snake(&format!("{kind:?}"))),
        SessionError::Ended => Class::Closed,
        SessionError::OutOfRange { .. } => Class::Value,
        _ => Class::Other,
    }
}

fn channel(e: &ChannelError) -> Class {
    match e {
        ChannelError::Session(s) => session(s),
        ChannelError::Fault { channel, fault } => Class::Fault {
            fault: fault.reason(),
            channel: *channel,
        },
        ChannelError::Timeout { .. } => Class::Timeout,
        _ => Class::Other,
    }
}

fn memory(e: &MemoryError) -> Class {
    match e {
        MemoryError::Alloc { source, .. } => source
            .downcast_ref::<SessionError>()
            .map_or(Class::Other, session),
        MemoryError::OutOfRange { .. }
        | MemoryError::NotOwned { .. }
        | MemoryError::NoGpuVa { .. }
        | MemoryError::Unmapped { .. } => Class::Value,
    }
}

fn copy(e: &CopyError) -> Class {
    match e {
        CopyError::Channel(c) => channel(c),
        CopyError::Memory(m) => memory(m),
        _ => Class::Value,
    }
}

fn load(e: &LoadError) -> Class {
    match e {
        LoadError::NoKernel { .. } => Class::NoKernel,
        LoadError::Memory(m) => memory(m),
        LoadError::Staging(s) => session(s),
        LoadError::Upload(c) => copy(c),
        _ => Class::Cubin,
    }
}

fn compute(e: &ComputeError) -> Class {
    match e {
        ComputeError::Channel(c) => channel(c),
        ComputeError::Shape(_) | ComputeError::Params(_) | ComputeError::Qmd(_) => Class::Launch,
        ComputeError::Window(_)
        | ComputeError::Cooperative { .. }
        | ComputeError::ForeignKernel { .. } => Class::Launch,
        ComputeError::Memory(m) => memory(m),
        ComputeError::Load(l) => load(l),
        ComputeError::Copy(c) => copy(c),
        _ => Class::Other,
    }
}

/// The Python exception for `e`.
fn raise(e: &(dyn Error + 'static), class: Class) -> PyErr {
    let msg = chain(e);
    Python::attach(|py| {
        let (err, attrs): (PyErr, Vec<(&str, Py<PyAny>)>) = match class {
            Class::Client => (CLIENT_ERROR.err(py, msg), vec![]),
            Class::Refused(reason) => (
                Refused::new_err(msg),
                vec![(
                    "reason",
                    reason
                        .into_pyobject(py)
                        .map(|o| o.into_any().unbind())
                        .unwrap_or_else(|_| py.None()),
                )],
            ),
            Class::Fault { fault, channel } => (
                Fault::new_err(msg),
                vec![
                    (
                        "fault",
                        fault
                            .into_pyobject(py)
                            .map(|o| o.into_any().unbind())
                            .unwrap_or_else(|_| py.None()),
                    ),
                    (
                        "channel",
                        channel
                            .into_pyobject(py)
                            .map(|o| o.into_any().unbind())
                            .unwrap_or_else(|_| py.None()),
                    ),
                ],
            ),
            Class::Timeout => (TIMEOUT.err(py, msg), vec![]),
            Class::Closed => (CLOSED.err(py, msg), vec![]),
            Class::Cubin => (CubinError::new_err(msg), vec![]),
            Class::Gone => (ExporterGone::new_err(msg), vec![]),
            Class::NoKernel => (PyKeyError::new_err(msg), vec![]),
            Class::Index => (PyIndexError::new_err(msg), vec![]),
            Class::Launch => (LaunchError::new_err(msg), vec![]),
            Class::Value => (PyValueError::new_err(msg), vec![]),
            Class::Other => (RigError::new_err(msg), vec![]),
        };
        let value = err.value(py);
        for (k, v) in attrs {
            // An attribute that cannot be set leaves the exception as it is.
            let _ = value.setattr(k, v);
        }
        err
    })
}

/// Converts the libraries' errors into rig's exceptions (`?` in the bindings).
pub trait IntoPy<T> {
    /// The result, its error raised as rig's exception.
    fn py(self) -> PyResult<T>;
}

macro_rules! into_py {
    ($ty:ty, $class:expr) => {
        impl<T> IntoPy<T> for Result<T, $ty> {
            fn py(self) -> PyResult<T> {
                self.map_err(|e| raise(&e, $class(&e)))
            }
        }
    };
}

into_py!(SessionError, session);
into_py!(ChannelError, channel);
into_py!(MemoryError, memory);
into_py!(CopyError, copy);
into_py!(LoadError, load);
into_py!(ComputeError, compute);
into_py!(ClientError, |_: &ClientError| Class::Client);
into_py!(rig_cubin::ModuleError, |_: &rig_cubin::ModuleError| {
    Class::Cubin
});
into_py!(RuntimeError, |e: &RuntimeError| match e {
    RuntimeError::Compute(c) => compute(c),
    RuntimeError::Copy(c) => copy(c),
    RuntimeError::Event(e) => event(e),
    RuntimeError::Shared(e) => shared(e),
    RuntimeError::Graph(g) => graph(g),
    RuntimeError::Replay { source, .. } => compute(source),
    RuntimeError::Value(ValueError::Memory(m)) => memory(m),
    RuntimeError::Value(_) => Class::Value,
});
into_py!(GraphError, graph);

fn graph(e: &GraphError) -> Class {
    match e {
        GraphError::Args { .. } | GraphError::Shape { .. } => Class::Launch,
        GraphError::NoLaunch { .. } | GraphError::NoArg { .. } => Class::Index,
        GraphError::Empty | GraphError::Submit { .. } => Class::Value,
    }
}
into_py!(SharedError, shared);

fn shared(e: &SharedError) -> Class {
    match e {
        SharedError::Session(s) => session(s),
        SharedError::Channel(c) => channel(c),
        SharedError::ExporterGone { .. } => Class::Gone,
        SharedError::Timeout { .. } => Class::Timeout,
        SharedError::ForeignChannel { .. } => Class::Value,
        SharedError::Protocol(_) | SharedError::Map { .. } => Class::Other,
    }
}

fn event(e: &EventError) -> Class {
    match e {
        EventError::Page(s) => session(s),
        EventError::Channel(c) => channel(c),
        EventError::Timeout { .. } => Class::Timeout,
        EventError::NoPage => Class::Other,
        EventError::Unknown { .. }
        | EventError::Overwritten { .. }
        | EventError::Reversed { .. } => Class::Value,
    }
}

/// A `Closed` for an object used after it was freed or closed.
pub fn closed(what: &str) -> PyErr {
    Python::attach(|py| CLOSED.err(py, format!("The {what} was freed or closed")))
}
