//! CUDA graphs: capture a stream's work once per shape and replay it. Parallel branches are
//! made while capturing by forking onto side streams with events (`Fork`) and joining back;
//! `GraphMode::Serial` keeps everything on the main stream for A/B.

use cudarc::driver::{sys, CudaGraph};

use crate::device::Stream;

use crate::device::{Event, Gpu, SIDE_STREAMS};
use crate::error::{drv, CudaError};

/// How independent work is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphMode {
    /// Independent projections as parallel branches.
    Parallel,
    /// Everything in one serial chain (`MUSER_CUDA_SERIAL=1`).
    Serial,
}

impl GraphMode {
    pub fn from_env() -> GraphMode {
        match std::env::var("MUSER_CUDA_SERIAL").as_deref() {
            Ok("1") => GraphMode::Serial,
            _ => GraphMode::Parallel,
        }
    }
}

/// A captured, instantiated graph with a label (for deadline errors).
pub struct Graph {
    pub label: String,
    exec: CudaGraph,
}

impl Graph {
    /// Capture everything `record` queues on `gpu`'s main stream.
    pub fn capture<F>(gpu: &Gpu, label: &str, record: F) -> Result<Graph, CudaError>
    where
        F: FnOnce() -> Result<(), CudaError>,
    {
        gpu.bind()?;
        let s = gpu.stream_arc();
        s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv("cuStreamBeginCapture"))?;
        let rec = record();
        let end = s.end_capture(sys::CUgraphInstantiate_flags(0));
        rec?;
        let exec = end
            .map_err(drv("cuStreamEndCapture"))?
            .ok_or_else(|| CudaError::Capture {
                label: label.into(),
                reason: "empty graph".into(),
            })?;
        exec.upload().map_err(drv("cuGraphUpload"))?;
        Ok(Graph {
            label: label.into(),
            exec,
        })
    }

    /// Queue one replay on the main stream.
    pub fn launch(&self) -> Result<(), CudaError> {
        self.exec.launch().map_err(drv("cuGraphLaunch"))
    }
}

/// Fork/join helper: branches run on side streams, ordered after the fork point and joined back
/// into the main stream by events (explicit producer→consumer edges).
pub struct Fork {
    start: Event,
    ends: Vec<Event>,
}

impl Fork {
    pub fn new() -> Result<Fork, CudaError> {
        Ok(Fork {
            start: Event::new(false)?,
            ends: (0..SIDE_STREAMS)
                .map(|_| Event::new(false))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Run `branches` (each gets the stream to launch on). In `Serial` mode all use the main
    /// stream in order; in `Parallel` mode branch 0 runs on the main stream and branch i>0 on
    /// side stream i-1, all joined before returning.
    pub fn run(
        &self,
        gpu: &Gpu,
        mode: GraphMode,
        branches: &mut [&mut dyn FnMut(Stream) -> Result<(), CudaError>],
    ) -> Result<(), CudaError> {
        assert!(branches.len() <= SIDE_STREAMS + 1, "too many branches");
        let main = gpu.stream();
        if mode == GraphMode::Serial || branches.len() == 1 {
            for b in branches.iter_mut() {
                b(main)?;
            }
            return Ok(());
        }
        self.start.record(main)?;
        for i in 1..branches.len() {
            self.start.wait_on(gpu.side(i - 1))?;
        }
        for (i, b) in branches.iter_mut().enumerate() {
            let s = if i == 0 { main } else { gpu.side(i - 1) };
            b(s)?;
        }
        for i in 1..branches.len() {
            self.ends[i - 1].record(gpu.side(i - 1))?;
            self.ends[i - 1].wait_on(main)?;
        }
        Ok(())
    }
}
