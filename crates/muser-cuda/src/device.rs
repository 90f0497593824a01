//! Opening the GPU: probing for the driver library at run time, the context and streams that
//! one `Gpu` owns, raw device buffers, events, and bounded waits.
//!
//! Invariants: every wait on the device is bounded (`Gpu::wait` polls an event against a
//! deadline and returns `CudaError::Deadline` naming the work); one `Gpu` owns its streams — the
//! engine's scheduler is the only user.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys, CudaContext, CudaStream};

use crate::error::{drv, CudaError};

/// A stream of an open `Gpu` (only a `Gpu` hands these out, so the handle is live while the
/// `Gpu` is), with the launch policy of its `Gpu` at the time it was handed out: `pdl` = kernels
/// launched on it carry the programmatic-dependent-launch attribute (`Gpu::set_pdl`).
#[derive(Clone, Copy, Debug)]
pub struct Stream {
    raw: sys::CUstream,
    pdl: bool,
}

impl Stream {
    pub(crate) fn raw(self) -> sys::CUstream {
        self.raw
    }
    /// Whether launches on this stream may overlap the previous kernel's tail (see
    /// `Gpu::set_pdl`).
    pub fn pdl(self) -> bool {
        self.pdl
    }
}

/// What `probe` found.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_mem: u64,
    pub driver_version: i32,
}

/// An open device: context, the main stream and side streams for parallel graph branches.
pub struct Gpu {
    /// Recorded by `wait` (one event, reused: no create/destroy per token). Declared first so
    /// it is destroyed while the context is still alive.
    done: Event,
    pub info: GpuInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    side: Vec<Arc<CudaStream>>,
    deadline: Duration,
    /// How long a wait polls its event without sleeping (`MUSER_CUDA_WAIT_SPIN_MS`).
    spin: Duration,
    /// Programmatic dependent launch for kernels on this device's streams (`set_pdl`).
    pdl: AtomicBool,
}

/// Number of side streams (parallel branches of a captured graph): `graph::Fork` uses the
/// first three, the L2 prefetch branch the last (`prefetch::PREFETCH_SIDE`).
pub const SIDE_STREAMS: usize = 4;

impl Gpu {
    /// Whether a CUDA driver library is loadable and reports at least one device.
    /// Never panics when CUDA is absent.
    pub fn probe() -> Result<Option<GpuInfo>, CudaError> {
        // SAFETY: only tries to dlopen the driver library; no symbol is called if absent.
        if !unsafe { sys::is_culib_present() } {
            return Ok(None);
        }
        result::init().map_err(drv("cuInit"))?;
        let n = CudaContext::device_count().map_err(drv("cuDeviceGetCount"))?;
        if n < 1 {
            return Ok(None);
        }
        let ctx = CudaContext::new(0).map_err(drv("cuCtxCreate"))?;
        Ok(Some(info_of(&ctx)?))
    }

    /// Open device `ordinal`. Errors (never panics) when there is no driver or no device.
    pub fn open(ordinal: usize) -> Result<Gpu, CudaError> {
        // SAFETY: see `probe`.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDevice(
                "the CUDA driver library (libcuda.so) is not loadable".into(),
            ));
        }
        // SAFETY: nvrtc presence check only dlopens.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(CudaError::NoDevice(
                "the NVRTC library (libnvrtc.so) is not loadable; kernels cannot be compiled"
                    .into(),
            ));
        }
        result::init().map_err(drv("cuInit"))?;
        let n = CudaContext::device_count().map_err(drv("cuDeviceGetCount"))?;
        if (ordinal as i32) >= n {
            return Err(CudaError::NoDevice(format!(
                "device {ordinal} requested, {n} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(drv("cuCtxCreate"))?;
        // SAFETY: Muser orders all work itself (one stream + explicit events); cudarc's
        // automatic per-buffer event tracking would add events inside captured graphs.
        unsafe { ctx.disable_event_tracking() };
        let info = info_of(&ctx)?;
        let stream = ctx.new_stream().map_err(drv("cuStreamCreate"))?;
        let side = (0..SIDE_STREAMS)
            .map(|_| ctx.new_stream().map_err(drv("cuStreamCreate")))
            .collect::<Result<_, _>>()?;
        let secs = std::env::var("MUSER_CUDA_DEADLINE_S")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .unwrap_or(300.0);
        let spin = wait_spin()?;
        Ok(Gpu {
            info,
            ctx,
            stream,
            side,
            deadline: Duration::from_secs_f64(secs),
            spin,
            pdl: AtomicBool::new(false),
            done: Event::new(false)?,
        })
    }

    /// How long a wait polls back to back (`MUSER_CUDA_WAIT_SPIN_MS`).
    pub fn wait_spin(&self) -> Duration {
        self.spin
    }

    pub fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Launch every later kernel on this device's streams with the programmatic-dependent-launch
    /// attribute (`on`) or without it. With it, a kernel's blocks may start while the previous
    /// kernel in the stream (or graph) still runs — issuing loads of data no kernel writes
    /// (weights) — and wait for it with `griddepcontrol.wait` before touching anything it wrote.
    /// Every Muser kernel does that wait (common.cuh `pdl_wait`, checked per entry point by the
    /// NVRTC test), so the attribute changes timing only, never results. Off by default
    /// (`MUSER_CUDA_PDL` in the engine).
    pub fn set_pdl(&self, on: bool) {
        self.pdl.store(on, Ordering::Relaxed);
    }

    /// The main stream.
    pub fn stream(&self) -> Stream {
        Stream {
            raw: self.stream.cu_stream(),
            pdl: self.pdl.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn stream_arc(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Side stream `i` (< SIDE_STREAMS).
    pub fn side(&self, i: usize) -> Stream {
        Stream {
            raw: self.side[i].cu_stream(),
            pdl: self.pdl.load(Ordering::Relaxed),
        }
    }

    /// Make this thread's current context the device's.
    pub fn bind(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(u64, u64), CudaError> {
        let (f, t) = self.ctx.mem_get_info().map_err(drv("cuMemGetInfo"))?;
        Ok((f as u64, t as u64))
    }

    /// Allocate `bytes` of device memory, zeroed in stream order on the main stream (zero for
    /// everything queued on this Gpu afterwards).
    pub fn alloc(&self, bytes: usize, what: &str) -> Result<DeviceBuffer, CudaError> {
        self.bind()?;
        let (free, total) = self.mem_info()?;
        if bytes as u64 > free {
            return Err(CudaError::OutOfMemory {
                what: what.to_string(),
                need: bytes as u64,
                free,
                total,
            });
        }
        // SAFETY: context bound above; the pointer is owned by the returned buffer.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(drv("cuMemAlloc"))?;
        let buf = DeviceBuffer {
            ptr,
            bytes,
            ctx: Arc::clone(&self.ctx),
        };
        // Zeroed on the main stream, so in order with everything this Gpu queues afterwards (its
        // side streams start from events recorded on main). `cuMemsetD8` would run on the
        // legacy default stream, which our non-blocking streams do not wait for: an upload or
        // kernel queued right after could run first and be zeroed — a race that showed only
        // with another process on the GPU (docs/cuda.md, "Bit-identity under GPU contention").
        // SAFETY: ptr..ptr+bytes was just allocated; the stream belongs to this context.
        unsafe { result::memset_d8_async(ptr, 0, bytes.max(1), self.stream().raw()) }
            .map_err(drv("cuMemsetD8Async"))?;
        Ok(buf)
    }

    /// Zero `bytes` at `ptr` on the main stream (stream-ordered; captured as a memset node
    /// while the main stream records a graph). Like `upload`, on a thread bound to the context.
    pub fn zero(&self, ptr: u64, bytes: usize) -> Result<(), CudaError> {
        // SAFETY: the caller passes a device range of at least `bytes` bytes owned by this
        // context; the stream belongs to this context.
        unsafe { result::memset_d8_async(ptr, 0, bytes, self.stream().raw()) }
            .map_err(drv("cuMemsetD8Async"))
    }

    /// Copy host data to `dst` on the main stream (stream-ordered). `src` must outlive the copy:
    /// callers wait (bounded) before dropping it, or pass long-lived data.
    pub fn upload<T: Copy>(&self, dst: u64, src: &[T]) -> Result<(), CudaError> {
        // SAFETY: the caller passes a device range at least `size_of_val(src)` long; from
        // pageable host memory the driver has staged `src` when the call returns (the device
        // copy itself stays ordered on the main stream), so `src` may be dropped then.
        unsafe { result::memcpy_htod_async(dst, src, self.stream().raw()) }
            .map_err(drv("cuMemcpyHtoD"))
    }

    /// Copy from the device into `dst` after waiting (bounded) for the stream.
    pub fn download<T: Copy>(&self, dst: &mut [T], src: u64, label: &str) -> Result<(), CudaError> {
        self.wait(label)?;
        // SAFETY: `src` holds at least `size_of_val(dst)` bytes (caller's contract); the stream
        // is idle, so the copy is immediate.
        unsafe { result::memcpy_dtoh_async(dst, src, self.stream().raw()) }
            .map_err(drv("cuMemcpyDtoH"))?;
        self.wait(label)
    }

    /// Measured device-to-device copy bandwidth in GB/s (bytes read + written per second) over a
    /// `bytes`-sized buffer: one warm-up copy, then the best of `reps` timed with events.
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, CudaError> {
        let a = self.alloc(bytes, "bandwidth probe (src)")?;
        let b = self.alloc(bytes, "bandwidth probe (dst)")?;
        let (start, end) = (Event::new(true)?, Event::new(true)?);
        let mut best = f64::MAX;
        for rep in 0..=reps.max(1) {
            start.record(self.stream())?;
            // SAFETY: both buffers hold `bytes` bytes and are owned here until the wait below.
            unsafe { result::memcpy_dtod_async(b.ptr(), a.ptr(), bytes, self.stream().raw()) }
                .map_err(drv("cuMemcpyDtoD"))?;
            end.record(self.stream())?;
            end.wait_bounded("bandwidth probe", self.deadline, self.spin)?;
            let ms = f64::from(end.since(&start)?);
            if rep > 0 {
                best = best.min(ms);
            }
        }
        Ok(2.0 * bytes as f64 / (best / 1e3) / 1e9)
    }

    /// Wait for everything queued on the main stream, bounded by the deadline
    /// (`MUSER_CUDA_DEADLINE_S`, default 300 s).
    pub fn wait(&self, label: &str) -> Result<(), CudaError> {
        self.done.record(self.stream())?;
        self.done.wait_bounded(label, self.deadline, self.spin)
    }
}

/// `MUSER_CUDA_WAIT_SPIN_MS` (default 50 since session 45): a wait polls its event back to back
/// for N ms, then sleeps 50 µs at a time (0: 2000 polls, then the sleeps — whose wake-up can put
/// up to ~0.1 ms between a decode step's end and the host seeing it). Session 45 (full forge,
/// with `MUSER_CUDA_HOST_STAGE=1`, `scripts/device/host-io-ab.sh`): the host's share of a decode
/// step 235.8 µs → 37.5 µs, tg128 +2.9%. The price: one host core busy while a step of up to
/// N ms runs.
fn wait_spin() -> Result<Duration, CudaError> {
    match std::env::var("MUSER_CUDA_WAIT_SPIN_MS") {
        Err(_) => Ok(Duration::from_millis(DEFAULT_WAIT_SPIN_MS)),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms <= 10_000 => Ok(Duration::from_millis(ms)),
            _ => Err(CudaError::Invalid(format!(
                "MUSER_CUDA_WAIT_SPIN_MS={v:?}: expected whole milliseconds 0..=10000"
            ))),
        },
    }
}

/// The default of `MUSER_CUDA_WAIT_SPIN_MS`.
pub const DEFAULT_WAIT_SPIN_MS: u64 = 50;

fn info_of(ctx: &Arc<CudaContext>) -> Result<GpuInfo, CudaError> {
    let mut drv_ver = 0i32;
    // SAFETY: plain query with a valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut drv_ver) }
        .result()
        .map_err(drv("cuDriverGetVersion"))?;
    Ok(GpuInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(drv("cuDeviceGetName"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(drv("cuDeviceGetAttribute"))?,
        total_mem: ctx.total_mem().map_err(drv("cuDeviceTotalMem"))? as u64,
        driver_version: drv_ver,
    })
}

/// A raw device allocation, freed on drop. Sub-ranges are addressed as `ptr + offset`.
pub struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// Device address of byte `off` (checked against the allocation).
    pub fn at(&self, off: usize) -> u64 {
        assert!(
            off <= self.bytes,
            "offset {off} beyond buffer of {} bytes",
            self.bytes
        );
        self.ptr + off as u64
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// A CUDA event (timing optional).
pub struct Event(sys::CUevent);

impl Event {
    pub fn new(timing: bool) -> Result<Event, CudaError> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        result::event::create(flags)
            .map(Event)
            .map_err(drv("cuEventCreate"))
    }
    pub fn raw(&self) -> sys::CUevent {
        self.0
    }
    pub fn record(&self, stream: Stream) -> Result<(), CudaError> {
        // SAFETY: both handles are live (owned by self / the Gpu).
        unsafe { result::event::record(self.0, stream.raw()) }.map_err(drv("cuEventRecord"))
    }
    /// Make `stream` wait for this event (a graph edge while capturing).
    pub fn wait_on(&self, stream: Stream) -> Result<(), CudaError> {
        // SAFETY: both handles are live.
        unsafe {
            result::stream::wait_event(
                stream.raw(),
                self.0,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(drv("cuStreamWaitEvent"))
    }
    /// Milliseconds from `start` to this event (both recorded with timing, both complete).
    pub fn since(&self, start: &Event) -> Result<f32, CudaError> {
        // SAFETY: both events are live.
        unsafe { result::event::elapsed(start.0, self.0) }.map_err(drv("cuEventElapsedTime"))
    }
    /// Poll until the event completes or `deadline` passes: back to back for the first 2000
    /// polls and for `spin` after the start (a decode step's end is then seen within a poll,
    /// not a sleep), then every 50 µs.
    pub fn wait_bounded(
        &self,
        label: &str,
        deadline: Duration,
        spin: Duration,
    ) -> Result<(), CudaError> {
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            // SAFETY: the event is live.
            match unsafe { result::event::query(self.0) } {
                Ok(()) => return Ok(()),
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => {}
                Err(e) => {
                    return Err(CudaError::Driver {
                        op: "cuEventQuery",
                        source: e,
                    })
                }
            }
            let elapsed = start.elapsed();
            if elapsed > deadline {
                return Err(CudaError::Deadline {
                    label: label.to_string(),
                    secs: deadline.as_secs_f64(),
                });
            }
            polls = polls.saturating_add(1);
            if polls <= 2000 || elapsed < spin {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// Raw pointer type used in kernel argument lists.
pub type RawArg = *mut c_void;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{elementwise_gpu, scale};

    /// A new buffer's zeroing is ordered before what its Gpu queues next even while the legacy
    /// default stream is busy: with the zeroing on that stream (`cuMemsetD8`) the upload below
    /// ran first and came back as zeros.
    #[test]
    fn a_new_buffer_is_zeroed_before_the_next_upload() {
        let Some((gpu, reg)) = elementwise_gpu() else {
            return;
        };
        let n = 1usize << 26;
        let big = gpu.alloc(n * 4, "busy work").expect("alloc");
        gpu.wait("busy work zeroed").expect("wait");
        // Milliseconds of passes over 256 MiB on the legacy default stream (handle 0).
        let legacy = Stream {
            raw: std::ptr::null_mut(),
            pdl: false,
        };
        for _ in 0..64 {
            scale(&reg, legacy, big.ptr(), 1.0, n).expect("busy launch");
        }
        let pattern: Vec<u32> = (0..4096u32)
            .map(|i| i.wrapping_mul(2654435761) | 1)
            .collect();
        let buf = gpu.alloc(pattern.len() * 4, "probe").expect("alloc");
        gpu.upload(buf.ptr(), &pattern).expect("upload");
        gpu.wait("upload").expect("wait");
        // Let the legacy stream's work (and anything queued behind it) finish before reading.
        // SAFETY: plain synchronisation of the context bound by `Gpu::open`.
        unsafe { sys::cuCtxSynchronize() }
            .result()
            .expect("cuCtxSynchronize");
        let mut got = vec![0u32; pattern.len()];
        gpu.download(&mut got, buf.ptr(), "probe")
            .expect("download");
        assert!(got == pattern, "the upload was overwritten by the zeroing");
    }
}
