//! NVIDIA's DCGM exporter, read: the `DCGM_FI_*` series of its Prometheus
//! page (dcgm-exporter 3.3's `default-counters.csv`, and the `PROF_`
//! fields of its `dcp-metrics-included.csv`) mapped onto one GPU's figures,
//! one entry per GPU.
//!
//! A GPU is told apart by its `Hostname`, `UUID` and `gpu` labels; series of
//! one GPU that differ in other labels (a pod's, MIG instances) are copies
//! of its figure, and the largest is kept, never their sum. A value that is
//! not a number, negative, or out of its range (a utilisation over 100 %, a
//! ratio over 1) is left out, as is a family whose `# TYPE` says it is a
//! histogram or a summary: a figure that is not there is "-", never 0.

use super::prom::{Kind, Page, Sample};

/// The figures of one GPU a page can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `DCGM_FI_DEV_GPU_UTIL`, percent.
    Util,
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, 0..1.
    EngineActive,
    /// `DCGM_FI_PROF_SM_ACTIVE`, 0..1.
    SmActive,
    /// `DCGM_FI_PROF_DRAM_ACTIVE`, 0..1.
    DramActive,
    /// `DCGM_FI_DEV_FB_USED`, MiB.
    FbUsed,
    /// `DCGM_FI_DEV_FB_FREE`, MiB.
    FbFree,
    /// `DCGM_FI_DEV_POWER_USAGE`, W.
    Power,
    /// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, mJ since the driver loaded (a counter).
    EnergyMj,
    /// `DCGM_FI_DEV_SM_CLOCK`, MHz.
    SmClock,
    /// `DCGM_FI_DEV_GPU_TEMP`, °C.
    Temp,
}

impl Field {
    pub const ALL: [Field; 10] = [
        Field::Util,
        Field::EngineActive,
        Field::SmActive,
        Field::DramActive,
        Field::FbUsed,
        Field::FbFree,
        Field::Power,
        Field::EnergyMj,
        Field::SmClock,
        Field::Temp,
    ];
    pub const N: usize = 10;

    /// The exporter's series name.
    pub fn metric(self) -> &'static str {
        match self {
            Field::Util => "DCGM_FI_DEV_GPU_UTIL",
            Field::EngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            Field::SmActive => "DCGM_FI_PROF_SM_ACTIVE",
            Field::DramActive => "DCGM_FI_PROF_DRAM_ACTIVE",
            Field::FbUsed => "DCGM_FI_DEV_FB_USED",
            Field::FbFree => "DCGM_FI_DEV_FB_FREE",
            Field::Power => "DCGM_FI_DEV_POWER_USAGE",
            Field::EnergyMj => "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            Field::SmClock => "DCGM_FI_DEV_SM_CLOCK",
            Field::Temp => "DCGM_FI_DEV_GPU_TEMP",
        }
    }

    fn of(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.metric() == name)
    }

    /// Whether `v` is a value this figure can take.
    fn possible(self, v: f64) -> bool {
        v.is_finite()
            && v >= 0.0
            && match self {
                Field::Util => v <= 100.0,
                Field::EngineActive | Field::SmActive | Field::DramActive => v <= 1.0,
                // 10 kW: no GPU draws more; a page that says so is wrong.
                Field::Power => v <= 10_000.0,
                Field::Temp => v <= 200.0,
                _ => true,
            }
    }
}

/// Who a GPU is, from its labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuId {
    /// Which `--gpu-metrics` URL it came from (two exporters that do not
    /// say their host apart still give two GPUs).
    pub source: usize,
    pub hostname: String,
    pub uuid: String,
    pub gpu: String,
    pub model_name: String,
    pub pod: String,
}

impl GpuId {
    fn of(s: &Sample, source: usize, host: &str) -> GpuId {
        let l = |k: &str| s.label(k).unwrap_or("").to_string();
        let hostname = s
            .label("Hostname")
            .filter(|h| !h.is_empty())
            .unwrap_or(host)
            .to_string();
        GpuId {
            source,
            hostname,
            uuid: l("UUID"),
            gpu: l("gpu"),
            model_name: l("modelName"),
            pod: l("pod"),
        }
    }

    /// Whether two ids name the same GPU (labels that are not identity aside).
    pub fn same(&self, o: &GpuId) -> bool {
        self.source == o.source
            && self.hostname == o.hostname
            && self.uuid == o.uuid
            && self.gpu == o.gpu
    }

    /// A short name for tables: `host:0` (the host left out when it is the only one).
    pub fn label(&self, with_host: bool) -> String {
        let gpu = if self.gpu.is_empty() {
            self.uuid.chars().take(12).collect()
        } else {
            self.gpu.clone()
        };
        if with_host && !self.hostname.is_empty() {
            format!("{}:{gpu}", self.hostname)
        } else {
            gpu
        }
    }
}

/// One GPU's figures in one scrape.
pub type Values = [Option<f64>; Field::N];

/// Most GPUs a run keeps apart (every exporter together); more are left out
/// and the report says so. A page's reader applies it first
/// ([`read`]), the run's history again over all exporters.
pub const MAX_GPUS: usize = 1024;

/// One page's GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuPage {
    pub gpus: Vec<(GpuId, Values)>,
    /// Values left out as impossible, and families of the wrong type.
    pub rejected: usize,
    /// GPUs past [`MAX_GPUS`] on the page, left out as it is
    /// read.
    pub dropped_gpus: usize,
}

/// Reads one exporter's page. `source` numbers the exporter, `host` is its
/// URL's host (for GPUs whose page gives no `Hostname`).
/// Each sample finds its GPU by a map, and GPUs past
/// [`MAX_GPUS`] are left out here: a page of ~100k GPUs was
/// scanned GPU by GPU for every sample (100 % CPU before the first stage).
pub fn read(page: &Page, source: usize, host: &str) -> GpuPage {
    use std::collections::{HashMap, HashSet};
    let mut out = GpuPage::default();
    let mut index: HashMap<(String, String, String), usize> = HashMap::new();
    let mut dropped: HashSet<(String, String, String)> = HashSet::new();
    for s in &page.samples {
        let Some(field) = Field::of(&s.name) else {
            continue;
        };
        if matches!(page.kind_of(&s.name), Kind::Histogram | Kind::Summary) {
            out.rejected += 1;
            continue;
        }
        if !field.possible(s.value) {
            out.rejected += 1;
            continue;
        }
        let id = GpuId::of(s, source, host);
        // `same` within one page (one source): host, UUID and index.
        let key = (id.hostname.clone(), id.uuid.clone(), id.gpu.clone());
        let i = match index.get(&key) {
            Some(&i) => i,
            None if out.gpus.len() < MAX_GPUS => {
                out.gpus.push((id.clone(), [None; Field::N]));
                index.insert(key, out.gpus.len() - 1);
                out.gpus.len() - 1
            }
            None => {
                dropped.insert(key);
                continue;
            }
        };
        let (known, values) = &mut out.gpus[i];
        if known.pod.is_empty() && !id.pod.is_empty() {
            known.pod = id.pod;
        }
        if known.model_name.is_empty() && !id.model_name.is_empty() {
            known.model_name = id.model_name;
        }
        let slot = &mut values[field as usize];
        *slot = Some(slot.map_or(s.value, |v: f64| v.max(s.value)));
    }
    out.dropped_gpus = dropped.len();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::prom;

    /// Two H100s as dcgm-exporter 3.3 writes them with its default
    /// counters (plus the DCP fields), on Kubernetes with a pod mapped.
    pub const SAMPLE: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 1755
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 2619
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 61
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 38
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 312.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 71.208000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 8129043561
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 2207731802
# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.
# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 0
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 0
# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).
# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
DCGM_FI_DEV_MEM_COPY_UTIL{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 41
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 4213
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 81004
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 76826
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 1
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 0
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 0.912345
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-9a07c2d1-44b3-8e2f-71c0-5e3b9d2a6c44",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03"} 0.000000
# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.
# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 0.401122
# HELP DCGM_FI_PROF_DRAM_ACTIVE Ratio of cycles the device memory interface is active sending or receiving data.
# TYPE DCGM_FI_PROF_DRAM_ACTIVE gauge
DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",UUID="GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="535.129.03",container="vllm",namespace="llm",pod="vllm-0"} 0.587001
"#;

    #[test]
    fn a_dcgm_exporter_page_gives_each_gpu_its_figures_and_labels() {
        let page = prom::parse(SAMPLE);
        assert_eq!(page.bad_lines, 0);
        let r = read(&page, 0, "10.0.0.7");
        assert_eq!(r.gpus.len(), 2);
        assert_eq!(r.rejected, 0);
        let (id, v) = &r.gpus[0];
        assert_eq!(id.gpu, "0");
        assert_eq!(id.uuid, "GPU-5fd4b4a2-6c3e-a1f0-2b8e-0d6c7a1e9f01");
        assert_eq!(id.model_name, "NVIDIA H100 80GB HBM3");
        assert_eq!(id.hostname, "gpu-node-7");
        assert_eq!(id.pod, "vllm-0");
        assert_eq!(v[Field::Power as usize], Some(312.5));
        assert_eq!(v[Field::EnergyMj as usize], Some(8_129_043_561.0));
        assert_eq!(v[Field::Util as usize], Some(97.0));
        assert_eq!(v[Field::EngineActive as usize], Some(0.912345));
        assert_eq!(v[Field::DramActive as usize], Some(0.587001));
        assert_eq!(v[Field::FbUsed as usize], Some(76_826.0));
        assert_eq!(v[Field::FbFree as usize], Some(4_213.0));
        assert_eq!(v[Field::SmClock as usize], Some(1980.0));
        assert_eq!(v[Field::Temp as usize], Some(61.0));
        // Not exported: absent, not zero.
        assert_eq!(v[Field::SmActive as usize], None);
        let (id1, v1) = &r.gpus[1];
        assert_eq!(id1.pod, "");
        assert_eq!(v1[Field::Util as usize], Some(0.0), "an idle GPU reads 0");
        assert_eq!(v1[Field::DramActive as usize], None);
        assert_eq!(id.label(true), "gpu-node-7:0");
        assert_eq!(id1.label(false), "1");
    }

    #[test]
    fn impossible_values_and_wrong_types_are_left_out_and_copies_not_summed() {
        let page = prom::parse(
            "# TYPE DCGM_FI_DEV_POWER_USAGE histogram\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 300\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 250\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\"} NaN\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\"} -5\n\
             DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\"} 1.5\n\
             DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",GPU_I_ID=\"1\"} 10\n\
             DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",GPU_I_ID=\"2\"} 30\n\
             some_other_metric{gpu=\"0\"} 1\n",
        );
        let r = read(&page, 3, "h");
        assert_eq!(r.rejected, 5);
        assert_eq!(r.gpus.len(), 1);
        let (id, v) = &r.gpus[0];
        assert_eq!(id.hostname, "h", "no Hostname label: the URL's host");
        assert_eq!(id.source, 3);
        assert_eq!(v[Field::FbUsed as usize], Some(30.0));
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, x)| i == Field::FbUsed as usize || x.is_none()));
    }

    /// A page of 100,000 GPUs was scanned GPU by GPU for each sample
    /// (quadratic: 100 % CPU before the first stage); it is read in one
    /// pass now, the GPUs past the cap left out and counted as it reads.
    #[test]
    fn a_page_of_a_hundred_thousand_gpus_is_read_in_one_pass_and_capped() {
        use std::fmt::Write as _;
        let mut text = String::new();
        for g in 0..100_000 {
            let _ = writeln!(
                text,
                "DCGM_FI_DEV_POWER_USAGE{{gpu=\"{g}\",UUID=\"GPU-{g}\",Hostname=\"h\"}} 300"
            );
        }
        let page = prom::parse(&text);
        let t0 = std::time::Instant::now();
        let r = read(&page, 0, "h");
        // Quadratic took minutes; linear takes milliseconds (a generous
        // bound for a busy debug build).
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(r.gpus.len(), MAX_GPUS);
        assert_eq!(r.dropped_gpus, 100_000 - MAX_GPUS);
    }
}
