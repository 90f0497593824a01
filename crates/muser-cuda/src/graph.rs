//! CUDA graphs: capture a stream's work once per shape and replay it. Parallel branches are
//! made while capturing by forking onto side streams with events (`Fork`) and joining back;
//! `GraphMode::Serial` keeps everything on the main stream for A/B.

use std::cell::Cell;

use cudarc::driver::{sys, CudaGraph};

use crate::device::Stream;

use crate::device::{Event, Gpu};
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
    /// Programmatic edges of the graph (counted with `Gpu::set_pdl` on, else 0).
    pub programmatic_edges: usize,
    exec: CudaGraph,
}

impl Graph {
    /// Capture everything `record` queues on `gpu`'s main stream. With programmatic dependent
    /// launch on (`Gpu::set_pdl`), capture turns the kernel→kernel dependencies into
    /// programmatic edges — the fork/join ones across side streams too (the forked-graph test
    /// counts them).
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
        let programmatic_edges = if gpu.stream().pdl() {
            programmatic_kernel_edges(exec.cu_graph())?
        } else {
            0
        };
        exec.upload().map_err(drv("cuGraphUpload"))?;
        Ok(Graph {
            label: label.into(),
            programmatic_edges,
            exec,
        })
    }

    /// Queue one replay on the main stream.
    pub fn launch(&self) -> Result<(), CudaError> {
        self.exec.launch().map_err(drv("cuGraphLaunch"))
    }
}

/// How many programmatic edges `graph` has (stream capture makes one wherever a kernel was
/// launched with the PDL attribute after a kernel in its stream).
fn programmatic_kernel_edges(graph: sys::CUgraph) -> Result<usize, CudaError> {
    let mut n = 0usize;
    // SAFETY: a count query (null arrays) on a valid graph.
    unsafe {
        sys::cuGraphGetEdges_v2(
            graph,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut n,
        )
    }
    .result()
    .map_err(drv("cuGraphGetEdges"))?;
    let mut from = vec![std::ptr::null_mut(); n];
    let mut to = vec![std::ptr::null_mut(); n];
    let zero = sys::CUgraphEdgeData {
        from_port: 0,
        to_port: 0,
        type_: 0,
        reserved: [0; 5],
    };
    let mut data = vec![zero; n];
    // SAFETY: the three arrays hold `n` entries each, the count the driver just reported.
    unsafe {
        sys::cuGraphGetEdges_v2(
            graph,
            from.as_mut_ptr(),
            to.as_mut_ptr(),
            data.as_mut_ptr(),
            &mut n,
        )
    }
    .result()
    .map_err(drv("cuGraphGetEdges"))?;
    let programmatic = sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8;
    Ok(data[..n.min(data.len())]
        .iter()
        .filter(|d| d.type_ == programmatic)
        .count())
}

/// Side streams a fork may use: all but the prefetch branch's (`prefetch::PREFETCH_SIDE`).
const FORK_SIDES: usize = crate::prefetch::PREFETCH_SIDE;

/// Fork/join helper: branches run on side streams, ordered after the fork point and joined back
/// into the main stream by events (explicit producer→consumer edges). The last branches of a
/// fork may be left running past it and joined later ([`Fork::run_late`], [`Fork::join_late`]):
/// the main stream goes on with work that does not read them.
pub struct Fork {
    start: Event,
    ends: Vec<Event>,
    /// Side streams `late.0 .. late.1` still to be joined (`join_late`).
    late: Cell<(usize, usize)>,
}

impl Fork {
    pub fn new() -> Result<Fork, CudaError> {
        Ok(Fork {
            start: Event::new(false)?,
            ends: (0..FORK_SIDES)
                .map(|_| Event::new(false))
                .collect::<Result<_, _>>()?,
            late: Cell::new((0, 0)),
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
        self.run_late(gpu, mode, branches, 0)
    }

    /// [`Fork::run`] with the last `late` branches (not branch 0) left unjoined: they run on
    /// past the return until [`Fork::join_late`] (serially, where nothing forks, they simply run
    /// in order). Late branches still pending from an earlier fork (a step that failed between
    /// the two calls) are joined first, so nothing overtakes them.
    pub fn run_late(
        &self,
        gpu: &Gpu,
        mode: GraphMode,
        branches: &mut [&mut dyn FnMut(Stream) -> Result<(), CudaError>],
        late: usize,
    ) -> Result<(), CudaError> {
        assert!(branches.len() <= FORK_SIDES + 1, "too many branches");
        self.join_late(gpu)?;
        let main = gpu.stream();
        if mode == GraphMode::Serial || branches.len() == 1 {
            for b in branches.iter_mut() {
                b(main)?;
            }
            return Ok(());
        }
        if late >= branches.len() {
            return Err(CudaError::Invalid(format!(
                "{late} late branches of {}: branch 0 runs on the main stream",
                branches.len()
            )));
        }
        self.start.record(main)?;
        for i in 1..branches.len() {
            self.start.wait_on(gpu.side(i - 1))?;
        }
        for (i, b) in branches.iter_mut().enumerate() {
            let s = if i == 0 { main } else { gpu.side(i - 1) };
            b(s)?;
        }
        let joined = branches.len() - late;
        for i in 1..branches.len() {
            self.ends[i - 1].record(gpu.side(i - 1))?;
            if i < joined {
                self.ends[i - 1].wait_on(main)?;
            }
        }
        self.late.set((joined - 1, branches.len() - 1));
        Ok(())
    }

    /// Join the late branches of the last [`Fork::run_late`] into the main stream (nothing when
    /// none is pending).
    pub fn join_late(&self, gpu: &Gpu) -> Result<(), CudaError> {
        let (from, to) = self.late.replace((0, 0));
        for e in &self.ends[from..to] {
            e.wait_on(gpu.stream())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{elementwise_gpu, scale};

    /// 2^20 test values (exact under a few doublings) and a device buffer for them.
    fn test_values(gpu: &Gpu) -> (usize, Vec<f32>, crate::device::DeviceBuffer) {
        let n = 1 << 20;
        let x0: Vec<f32> = (0..n).map(|i| (i % 977) as f32 - 488.0).collect();
        let buf = gpu.alloc(n * 4, "x").expect("alloc");
        (n, x0, buf)
    }

    /// A late branch (A; B ∥ C, C joined only after D; E): D on the main stream overlaps C,
    /// E sees C's writes — in a captured graph with and without programmatic dependent launch,
    /// and eagerly; serially C simply runs in order.
    #[test]
    fn late_branches_join_where_asked() {
        let Some((gpu, reg)) = elementwise_gpu() else {
            return;
        };
        let (n, x0, buf) = test_values(&gpu);
        let double = |s: Stream, off: usize, len: usize| {
            scale(&reg, s, buf.ptr() + 4 * off as u64, 2.0, len)
        };
        let fork = Fork::new().expect("fork");
        // A doubles all, B the first half, C (late) the second, D the first half again, E all:
        // the first half x 16, the second x 8.
        let step = || -> Result<(), CudaError> {
            double(gpu.stream(), 0, n)?;
            let mut b = |s: Stream| double(s, 0, n / 2);
            let mut c = |s: Stream| double(s, n / 2, n / 2);
            fork.run_late(&gpu, GraphMode::Parallel, &mut [&mut b, &mut c], 1)?;
            double(gpu.stream(), 0, n / 2)?;
            fork.join_late(&gpu)?;
            double(gpu.stream(), 0, n)
        };
        let check = |what: &str| {
            let mut got = vec![0f32; n];
            gpu.download(&mut got, buf.ptr(), "x").expect("download");
            for (i, (&g, &x)) in got.iter().zip(&x0).enumerate() {
                let want = x * if i < n / 2 { 16.0 } else { 8.0 };
                assert_eq!(g, want, "{what}: value {i}");
            }
        };
        for pdl in [false, true] {
            gpu.set_pdl(pdl);
            gpu.upload(buf.ptr(), &x0).expect("upload");
            let g = Graph::capture(&gpu, "late-branch test graph", step).expect("capture");
            g.launch().expect("replay");
            gpu.wait("late-branch test graph").expect("wait");
            check(&format!("graph, pdl {pdl}"));
        }
        gpu.upload(buf.ptr(), &x0).expect("upload");
        step().expect("eager");
        gpu.wait("late-branch eager").expect("wait");
        check("eager");
        // Serially the late branch runs in place; nothing is left to join.
        gpu.upload(buf.ptr(), &x0).expect("upload");
        double(gpu.stream(), 0, n).expect("A");
        let mut b = |s: Stream| double(s, 0, n / 2);
        let mut c = |s: Stream| double(s, n / 2, n / 2);
        fork.run_late(&gpu, GraphMode::Serial, &mut [&mut b, &mut c], 1)
            .expect("serial");
        double(gpu.stream(), 0, n / 2).expect("D");
        fork.join_late(&gpu).expect("join");
        double(gpu.stream(), 0, n).expect("E");
        gpu.wait("late-branch serial").expect("wait");
        check("serial");
        // A single branch runs in place whatever `late`; of several, branch 0 cannot be late.
        let mut b = |s: Stream| double(s, 0, n);
        assert!(
            fork.run_late(&gpu, GraphMode::Parallel, &mut [&mut b], 1)
                .is_ok(),
            "one branch runs in place"
        );
        let mut b = |s: Stream| double(s, 0, 1);
        let mut c = |s: Stream| double(s, 1, 1);
        assert!(fork
            .run_late(&gpu, GraphMode::Parallel, &mut [&mut b, &mut c], 2)
            .is_err());
        gpu.wait("late-branch refusal").expect("wait");
    }

    /// A forked graph (A; B ∥ C on a side stream; D) replays to the same values with
    /// programmatic dependent launch on and off; with it on, all four kernel→kernel edges are
    /// programmatic — the fork's and join's cross-stream ones too (as capture made them on the
    /// H200, CUDA 13 driver 580).
    #[test]
    fn forked_graph_gets_programmatic_edges_and_the_same_results() {
        let Some((gpu, reg)) = elementwise_gpu() else {
            return;
        };
        let (n, x0, buf) = test_values(&gpu);
        // X[i] *= 2 over `len` values from `off`.
        let double = |s: Stream, off: usize, len: usize| {
            scale(&reg, s, buf.ptr() + 4 * off as u64, 2.0, len)
        };
        for pdl in [false, true] {
            gpu.set_pdl(pdl);
            gpu.upload(buf.ptr(), &x0).expect("upload");
            let fork = Fork::new().expect("fork");
            let g = Graph::capture(&gpu, "forked test graph", || {
                double(gpu.stream(), 0, n)?;
                let mut b = |s: Stream| double(s, 0, n / 2);
                let mut c = |s: Stream| double(s, n / 2, n / 2);
                fork.run(&gpu, GraphMode::Parallel, &mut [&mut b, &mut c])?;
                double(gpu.stream(), 0, n)
            })
            .expect("capture");
            eprintln!("pdl {pdl}: {} programmatic edges", g.programmatic_edges);
            assert_eq!(g.programmatic_edges, if pdl { 4 } else { 0 }, "pdl {pdl}");
            for _ in 0..3 {
                g.launch().expect("replay");
            }
            gpu.wait("forked test graph").expect("wait");
            let mut got = vec![0f32; n];
            gpu.download(&mut got, buf.ptr(), "x").expect("download");
            // Three replays of three doublings: × 512, exact in f32.
            for (i, (&g, &x)) in got.iter().zip(&x0).enumerate() {
                assert_eq!(g, x * 512.0, "pdl {pdl}: value {i}");
            }
        }
    }
}
