//! A graph: a run of launches recorded once — each one's kernel, shape and arguments,
//! checked and laid out as the kernel's parameter bytes — and replayed by one call
//! ([`crate::Runtime::replay`]), the role of CUDA's `cudaGraphLaunch` and of the
//! graphs tinygrad's `TinyJit` builds. Between replays a caller patches what changed
//! (an argument, a launch's shape) in place; nothing else is looked at again.
//!
//! Why: a runtime above rig in another language pays its own call, argument
//! conversion and lock per launch (Python's: about 4 µs, docs/BENCHMARKS.md, "Graphs
//! replayed in one call"); a replay pays them once per graph, and each launch costs
//! the compute channel's own host time (a template look-up, one copy of the laid-out
//! parameters, the slot's patch and a queued ring entry).
//!
//! Flow: [`Graph::add`] checks the shape against sm_90 and the kernel (`launch::Shape`)
//! and lays the arguments out (`params::lay`) → [`Graph::set_arg`] / [`Graph::set_shape`]
//! patch one → `Runtime::replay` orders the first launch after its dependencies and
//! queues each launch on the compute channel from its laid-out bytes
//! (`ComputeChannel::enqueue_recorded`), ringing the doorbell as [`Submit`] says.
//!
//! Not here: templates, slots and chaining (`compute`, `template`); what a replay
//! sends (docs/compute.md, "Graphs"). Cooperative launches are not recorded.

use std::cell::OnceCell;

use crate::{
    cbank0::Cbank0Error,
    launch::{Dim3, LaunchError, Shape},
    load::Kernel,
    params::{self, Arg},
    template::Key,
};

/// Launches recorded once, replayed by `Runtime::replay`.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    launches: Vec<Recorded>,
    /// Per kernel-and-shape, in the order first seen: the index of its first launch
    /// and how many there are. Counted at the first replay that needs it
    /// ([`Graph::repeats`]), again after `add` or `set_shape`.
    counts: OnceCell<Vec<(usize, usize)>>,
}

/// One recorded launch.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) kernel: Kernel,
    /// Its template's key: the kernel, its shape and dynamic shared memory.
    pub(crate) key: Key,
    /// The kernel's parameter bytes as bank 0 holds them from the parameter base.
    pub(crate) params: Vec<u8>,
}

/// When a replay rings the compute channel's doorbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Submit {
    /// After the first launch, then after runs of 1, 2, 4, 8… launches: the GPU starts
    /// on the first while the rest are queued. Each run's first launch waits for the
    /// run before it with a WFI instead of its QMD's chain.
    #[default]
    Early,
    /// Once, after the last launch: every launch chained behind the one before.
    Once,
}

impl std::str::FromStr for Submit {
    type Err = GraphError;

    fn from_str(s: &str) -> Result<Self, GraphError> {
        match s {
            "early" => Ok(Self::Early),
            "once" => Ok(Self::Once),
            _ => Err(GraphError::Submit { given: s.into() }),
        }
    }
}

/// What a graph refuses.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GraphError {
    /// A launch index past the graph's end.
    #[error("The graph has {len} launches; there is no launch {launch}")]
    NoLaunch {
        /// The index given.
        launch: usize,
        /// The graph's launches.
        len: usize,
    },
    /// An argument index past the kernel's parameters.
    #[error("Launch {launch} ({kernel}) takes {params} arguments; there is no argument {index}")]
    NoArg {
        /// The launch.
        launch: usize,
        /// Its kernel.
        kernel: String,
        /// The index given.
        index: usize,
        /// The kernel's parameters.
        params: usize,
    },
    /// Arguments that do not match the kernel's parameters.
    #[error("Launch {launch} ({kernel}): the arguments are refused")]
    Args {
        /// The launch.
        launch: usize,
        /// Its kernel.
        kernel: String,
        /// Which and why.
        #[source]
        source: Cbank0Error,
    },
    /// A shape sm_90 or the kernel does not allow.
    #[error("Launch {launch} ({kernel}): the shape is refused")]
    Shape {
        /// The launch.
        launch: usize,
        /// Its kernel.
        kernel: String,
        /// Which extent and its limit.
        #[source]
        source: LaunchError,
    },
    /// A replay of no launches (it would have no value to wait for).
    #[error("The graph has no launches to replay")]
    Empty,
    /// A submit policy by a name there is none of.
    #[error("Submit policy {given:?}: early or once")]
    Submit {
        /// The name given.
        given: String,
    },
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a launch of `kernel` over `grid` blocks of `block` threads with
    /// `dynamic_shared` bytes of dynamic shared memory and `args` (one per parameter,
    /// sizes as the kernel's); returns its index. Nothing reaches the GPU.
    ///
    /// # Errors
    /// [`GraphError::Shape`], [`GraphError::Args`]; the graph is unchanged.
    pub fn add(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
    ) -> Result<usize, GraphError> {
        let launch = self.launches.len();
        let key = key(launch, kernel, grid.into(), block.into(), dynamic_shared)?;
        let info = kernel.info();
        let mut laid = vec![0; usize::try_from(info.param_bytes()).unwrap_or(0)];
        params::lay(info.params(), args, &mut laid).map_err(|source| GraphError::Args {
            launch,
            kernel: kernel.name().into(),
            source,
        })?;
        self.launches.push(Recorded {
            kernel: kernel.clone(),
            key,
            params: laid,
        });
        self.counts.take();
        Ok(launch)
    }

    /// Sets argument `index` of launch `launch` for the replays from now on.
    ///
    /// # Errors
    /// [`GraphError::NoLaunch`], [`GraphError::NoArg`], [`GraphError::Args`] (a size
    /// other than the parameter's); the graph is unchanged.
    pub fn set_arg(&mut self, launch: usize, index: usize, arg: Arg<'_>) -> Result<(), GraphError> {
        let len = self.launches.len();
        let r = self
            .launches
            .get_mut(launch)
            .ok_or(GraphError::NoLaunch { launch, len })?;
        let p = param(launch, &r.kernel, index)?;
        if usize::try_from(p.size).ok() != Some(arg.size()) {
            return Err(GraphError::Args {
                launch,
                kernel: r.kernel.name().into(),
                source: Cbank0Error::Size {
                    ordinal: p.ordinal,
                    given: arg.size(),
                    expected: p.size,
                },
            });
        }
        let at = usize::from(p.offset);
        // PANIC: rig-cubin checked that every parameter lies inside the kernel's
        // parameter bytes, which `params` holds whole (`add` sized it so).
        arg.put(&mut r.params[at..at + arg.size()]);
        Ok(())
    }

    /// Sets launch `launch`'s grid and block (its dynamic shared memory stays).
    ///
    /// # Errors
    /// [`GraphError::NoLaunch`], [`GraphError::Shape`]; the graph is unchanged.
    pub fn set_shape(
        &mut self,
        launch: usize,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
    ) -> Result<(), GraphError> {
        let len = self.launches.len();
        let r = self
            .launches
            .get_mut(launch)
            .ok_or(GraphError::NoLaunch { launch, len })?;
        r.key = key(
            launch,
            &r.kernel,
            grid.into(),
            block.into(),
            r.key.dynamic_shared,
        )?;
        self.counts.take();
        Ok(())
    }

    /// The size in bytes of argument `index` of launch `launch`.
    ///
    /// # Errors
    /// [`GraphError::NoLaunch`], [`GraphError::NoArg`].
    pub fn arg_size(&self, launch: usize, index: usize) -> Result<u32, GraphError> {
        let r = self.launches.get(launch).ok_or(GraphError::NoLaunch {
            launch,
            len: self.launches.len(),
        })?;
        Ok(param(launch, &r.kernel, index)?.size)
    }

    /// Launch `launch`'s grid and block.
    pub fn shape(&self, launch: usize) -> Option<(Dim3, Dim3)> {
        self.launches.get(launch).map(|r| (r.key.grid, r.key.block))
    }

    /// Launch `launch`'s parameter bytes as laid out (from the kernel's parameter base).
    pub fn params(&self, launch: usize) -> Option<&[u8]> {
        self.launches.get(launch).map(|r| r.params.as_slice())
    }

    /// Its launches.
    pub fn len(&self) -> usize {
        self.launches.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.launches.is_empty()
    }

    pub(crate) fn launches(&self) -> &[Recorded] {
        &self.launches
    }

    /// Each kernel-and-shape that more than `over` of its launches share: the index of
    /// the first of them and how many there are. Counted once per shape of the graph,
    /// not per replay; nothing to count where the graph has `over` launches or fewer.
    pub(crate) fn repeats(&self, over: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let counts: &[(usize, usize)] = if self.launches.len() <= over {
            &[]
        } else {
            self.counts.get_or_init(|| {
                let mut seen: Vec<(usize, usize)> = Vec::new();
                for (j, r) in self.launches.iter().enumerate() {
                    match seen
                        .iter_mut()
                        .find(|(f, _)| self.launches[*f].key == r.key)
                    {
                        Some((_, n)) => *n += 1,
                        None => seen.push((j, 1)),
                    }
                }
                seen
            })
        };
        counts.iter().copied().filter(move |&(_, n)| n > over)
    }
}

/// The template key of a launch of `kernel` in that shape, checked.
fn key(
    launch: usize,
    kernel: &Kernel,
    grid: Dim3,
    block: Dim3,
    dynamic_shared: u32,
) -> Result<Key, GraphError> {
    Shape::new(kernel.info(), grid, block, dynamic_shared).map_err(|source| GraphError::Shape {
        launch,
        kernel: kernel.name().into(),
        source,
    })?;
    Ok(Key {
        kernel: kernel.id,
        grid,
        block,
        dynamic_shared,
        cooperative: false,
    })
}

/// Parameter `index` of `kernel`, for launch `launch`.
fn param(launch: usize, kernel: &Kernel, index: usize) -> Result<rig_cubin::Param, GraphError> {
    let params = kernel.info().params();
    params.get(index).copied().ok_or_else(|| GraphError::NoArg {
        launch,
        kernel: kernel.name().into(),
        index,
        params: params.len(),
    })
}
