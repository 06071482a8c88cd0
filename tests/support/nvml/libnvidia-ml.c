/* A test double of NVIDIA's NVML library (libnvidia-ml.so.1), for the fleet and GPU health tests:
 * nvidia-ml-py loads it through LD_LIBRARY_PATH as it would load the driver's. What it reports comes
 * from environment variables, read at nvmlInit:
 *   DD_NVML_DRIVER   the driver version ("550.54.15")
 *   DD_NVML_CUDA     the CUDA version the driver supports, as NVML encodes it (12040 = 12.4)
 *   DD_NVML_GPUS     one GPU per ';': name|memory MiB|PCI bus id|UUID|utilisation %
 *   DD_NVML_CC       the compute capability of every GPU ("9.0", the default: a Hopper part)
 *   DD_NVML_FAIL     when set, nvmlInit fails as it does without a driver (NVML_ERROR_DRIVER_NOT_LOADED)
 *   DD_NVML_TRACE    a file nvmlInit appends "nvmlInit" to: a test proves NVML was (not) loaded
 *   DD_NVML_HEALTH   one record per ';', in DD_NVML_GPUS's order: what differs from a healthy H200 on
 *                    an HGX board (Gen5 x16, persistence on, ECC on and clean, 18 NVLinks up, fabric
 *                    Completed/Success, clocks at their max, power limit at its default, no process),
 *                    as comma-separated key=value (see KEYS below), e.g.
 *                    "gen=3,width=8,events=0x8,persistence=0,remap_pending=1,procs=4242:8192+4243:512,
 *                    nvlink_down=0x4,unsupported=fabric+remap". Power is in W, clocks in MHz, procs
 *                    pid:MiB. unsupported names the calls that answer NVML_ERROR_NOT_SUPPORTED for that
 *                    GPU: pcie, replays, persistence, compute, mig, events, app_clocks, power,
 *                    temperature, ecc, retired, remap, nvlink, fabric, processes.
 * A function this double does not define is NVML_ERROR_FUNCTION_NOT_FOUND to the binding, as on an old
 * driver; the code under test must cope with that anyway. Built with -DOLD_DRIVER, the double lacks
 * the calls drivers before 535 did not have (clocks event reasons, the GPU's own max PCIe generation,
 * fabric info, the v3 process list). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUCCESS 0
#define INVALID_ARGUMENT 2
#define NOT_SUPPORTED 3
#define INSUFFICIENT_SIZE 7
#define DRIVER_NOT_LOADED 9
#define MAX_GPUS 32
#define MAX_PROCS 8

typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned int gpu, memory; } utilization_t;
typedef struct { char bus_legacy[16]; unsigned int domain, bus, device, pci_device_id, pci_subsystem_id; char bus_id[32]; } pci_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gpu_instance, compute_instance; } process_t;
typedef struct { unsigned char cluster_uuid[16]; int status; unsigned int clique, state; } fabric_t;

typedef struct {
    unsigned int gen, gen_max, gpu_gen_max, width, width_max, replays;
    unsigned int persistence, compute, mig, mig_pending;
    unsigned long long events;
    unsigned int gfx, gfx_max, mem, mem_max, app_gfx, app_mem, default_app_gfx, default_app_mem;
    unsigned int power_limit, power_default, power_draw, temp; /* W, as a test writes them */
    unsigned int ecc;
    unsigned long long dbe_volatile, dbe_aggregate, sbe_volatile, sbe_aggregate;
    unsigned int retired_sbe, retired_dbe, retired_pending;
    unsigned int remap_corr, remap_unc, remap_pending, remap_failure;
    unsigned int nvlinks;
    unsigned long long nvlink_down; /* a bit per inactive link */
    unsigned int fabric_state, fabric_status;
} health_t;

typedef struct {
    char name[96]; unsigned long long mib; char bus[32]; char uuid[96]; unsigned int util;
    health_t health;
    unsigned int procs; unsigned int pids[MAX_PROCS]; unsigned long long proc_mib[MAX_PROCS];
    char unsupported[256]; /* "+fabric+remap+" */
} gpu_t;

static const health_t HEALTHY = {
    .gen = 5, .gen_max = 5, .gpu_gen_max = 5, .width = 16, .width_max = 16, .replays = 0,
    .persistence = 1, .compute = 0, .mig = 0, .mig_pending = 0, .events = 0,
    .gfx = 1980, .gfx_max = 1980, .mem = 2619, .mem_max = 2619,
    .app_gfx = 1980, .app_mem = 2619, .default_app_gfx = 1980, .default_app_mem = 2619,
    .power_limit = 700, .power_default = 700, .power_draw = 120, .temp = 34,
    .ecc = 1, .nvlinks = 18, .fabric_state = 3, .fabric_status = 0,
};

typedef struct { const char *key; size_t offset; int wide; } option_t;
#define U(name) { #name, offsetof(health_t, name), 0 }
#define W(name) { #name, offsetof(health_t, name), 1 }
static const option_t KEYS[] = {
    U(gen), U(gen_max), U(gpu_gen_max), U(width), U(width_max), U(replays), U(persistence), U(compute), U(mig),
    U(mig_pending), W(events), U(gfx), U(gfx_max), U(mem), U(mem_max), U(app_gfx), U(app_mem), U(default_app_gfx),
    U(default_app_mem), U(power_limit), U(power_default), U(power_draw), U(temp), U(ecc), W(dbe_volatile),
    W(dbe_aggregate), W(sbe_volatile), W(sbe_aggregate), U(retired_sbe), U(retired_dbe), U(retired_pending),
    U(remap_corr), U(remap_unc), U(remap_pending), U(remap_failure), U(nvlinks), W(nvlink_down), U(fabric_state),
    U(fabric_status),
};

static gpu_t gpus[MAX_GPUS];
static unsigned int count;

static void field(char **cursor, char *out, size_t size) {
    char *end = strchr(*cursor, '|');
    size_t length = end ? (size_t)(end - *cursor) : strlen(*cursor);
    if (length >= size) length = size - 1;
    memcpy(out, *cursor, length);
    out[length] = 0;
    *cursor += end ? length + 1 : length;
}

static void set_health(gpu_t *gpu, char *pair) {
    char *value = strchr(pair, '=');
    if (!value) return;
    *value++ = 0;
    if (strcmp(pair, "unsupported") == 0) {
        snprintf(gpu->unsupported, sizeof gpu->unsupported, "+%s+", value);
        return;
    }
    if (strcmp(pair, "procs") == 0) { /* pid:MiB+pid:MiB */
        char *save = NULL;
        for (char *one = strtok_r(value, "+", &save); one && gpu->procs < MAX_PROCS; one = strtok_r(NULL, "+", &save)) {
            gpu->pids[gpu->procs] = (unsigned int)strtoul(one, &one, 10);
            gpu->proc_mib[gpu->procs++] = *one == ':' ? strtoull(one + 1, NULL, 10) : 0;
        }
        return;
    }
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (strcmp(pair, KEYS[i].key) == 0) {
            char *slot = (char *)&gpu->health + KEYS[i].offset;
            unsigned long long number = strtoull(value, NULL, 0);
            if (KEYS[i].wide) *(unsigned long long *)slot = number;
            else *(unsigned int *)slot = (unsigned int)number;
            return;
        }
}

static void read_health(void) {
    const char *spec = getenv("DD_NVML_HEALTH");
    char copy[8192];
    unsigned int index = 0;
    snprintf(copy, sizeof copy, "%s", spec ? spec : "");
    /* strsep keeps empty records: ";gen=3" leaves GPU 0 healthy */
    for (char *cursor = copy, *record; (record = strsep(&cursor, ";")) != NULL && index < count; index++) {
        char *save = NULL;
        for (char *pair = strtok_r(record, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) set_health(&gpus[index], pair);
    }
}

int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *trace = getenv("DD_NVML_TRACE");
    if (trace) {
        FILE *out = fopen(trace, "a");
        if (out) { fputs("nvmlInit\n", out); fclose(out); }
    }
    if (getenv("DD_NVML_FAIL")) return DRIVER_NOT_LOADED;
    const char *spec = getenv("DD_NVML_GPUS");
    char copy[8192], number[32];
    count = 0;
    snprintf(copy, sizeof copy, "%s", spec ? spec : "");
    for (char *record = strtok(copy, ";"); record && count < MAX_GPUS; record = strtok(NULL, ";")) {
        gpu_t *gpu = &gpus[count++];
        memset(gpu, 0, sizeof *gpu);
        gpu->health = HEALTHY;
        char *cursor = record;
        field(&cursor, gpu->name, sizeof gpu->name);
        field(&cursor, number, sizeof number);
        gpu->mib = strtoull(number, NULL, 10);
        field(&cursor, gpu->bus, sizeof gpu->bus);
        field(&cursor, gpu->uuid, sizeof gpu->uuid);
        field(&cursor, number, sizeof number);
        gpu->util = (unsigned int)strtoul(number, NULL, 10);
    }
    read_health();
    return SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return SUCCESS; }
const char *nvmlErrorString(int result) {
    return result == DRIVER_NOT_LOADED ? "Driver Not Loaded" : result == NOT_SUPPORTED ? "Not Supported" : "Unknown Error";
}

static int copy_text(const char *text, char *out, unsigned int size) {
    if (strlen(text) + 1 > size) return INSUFFICIENT_SIZE;
    strcpy(out, text);
    return SUCCESS;
}

/* whether the call named key answers for this GPU (not "unsupported=…+key+…") */
static int supported(const gpu_t *device, const char *key) {
    char needle[64];
    snprintf(needle, sizeof needle, "+%s+", key);
    return strstr(device->unsupported, needle) == NULL;
}

#define ANSWER(key, out, value) do { if (!supported(device, key)) return NOT_SUPPORTED; *(out) = (value); return SUCCESS; } while (0)

int nvmlSystemGetDriverVersion(char *version, unsigned int size) {
    const char *driver = getenv("DD_NVML_DRIVER");
    return copy_text(driver ? driver : "550.54.15", version, size);
}

int nvmlSystemGetCudaDriverVersion(int *version) {
    const char *cuda = getenv("DD_NVML_CUDA");
    *version = cuda ? atoi(cuda) : 12040;
    return SUCCESS;
}

int nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

int nvmlDeviceGetCount_v2(unsigned int *out) { *out = count; return SUCCESS; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, gpu_t **device) {
    if (index >= count) return INVALID_ARGUMENT;
    *device = &gpus[index];
    return SUCCESS;
}

int nvmlDeviceGetName(gpu_t *device, char *name, unsigned int size) { return copy_text(device->name, name, size); }
int nvmlDeviceGetUUID(gpu_t *device, char *uuid, unsigned int size) { return copy_text(device->uuid, uuid, size); }

static unsigned long long held_mib(const gpu_t *device) {
    unsigned long long total = 0;
    for (unsigned int i = 0; i < device->procs; i++) total += device->proc_mib[i];
    return total;
}

int nvmlDeviceGetMemoryInfo(gpu_t *device, memory_t *memory) {
    memory->total = device->mib << 20;
    memory->used = held_mib(device) << 20;
    memory->free = memory->total - memory->used;
    return SUCCESS;
}

int nvmlDeviceGetUtilizationRates(gpu_t *device, utilization_t *rates) {
    rates->gpu = device->util;
    rates->memory = device->util;
    return SUCCESS;
}

int nvmlDeviceGetMigMode(gpu_t *device, unsigned int *current, unsigned int *pending) {
    if (!supported(device, "mig")) return NOT_SUPPORTED;
    *current = device->health.mig;
    *pending = device->health.mig_pending;
    return SUCCESS;
}

static unsigned int clock_of(const gpu_t *device, int type, int max) {
    const health_t *h = &device->health;
    if (type == 2) return max ? h->mem_max : h->mem;
    return max ? h->gfx_max : h->gfx; /* graphics, SM and video alike */
}

int nvmlDeviceGetMaxClockInfo(gpu_t *device, int type, unsigned int *clock) { *clock = clock_of(device, type, 1); return SUCCESS; }
int nvmlDeviceGetClockInfo(gpu_t *device, int type, unsigned int *clock) { *clock = clock_of(device, type, 0); return SUCCESS; }
int nvmlDeviceGetApplicationsClock(gpu_t *device, int type, unsigned int *clock) {
    ANSWER("app_clocks", clock, type == 2 ? device->health.app_mem : device->health.app_gfx);
}
int nvmlDeviceGetDefaultApplicationsClock(gpu_t *device, int type, unsigned int *clock) {
    ANSWER("app_clocks", clock, type == 2 ? device->health.default_app_mem : device->health.default_app_gfx);
}

int nvmlDeviceGetMemoryBusWidth(gpu_t *device, unsigned int *width) {
    (void)device;
    *width = 6144;
    return SUCCESS;
}

int nvmlDeviceGetCudaComputeCapability(gpu_t *device, int *major, int *minor) {
    const char *cc = getenv("DD_NVML_CC");
    (void)device;
    *major = 9;
    *minor = 0;
    if (cc && sscanf(cc, "%d.%d", major, minor) != 2) return INVALID_ARGUMENT;
    return SUCCESS;
}

int nvmlDeviceGetIndex(gpu_t *device, unsigned int *index) {
    *index = (unsigned int)(device - gpus);
    return SUCCESS;
}

int nvmlDeviceGetHandleByUUID(const char *uuid, gpu_t **device) {
    for (unsigned int i = 0; i < count; i++)
        if (strcmp(gpus[i].uuid, uuid) == 0) {
            *device = &gpus[i];
            return SUCCESS;
        }
    return INVALID_ARGUMENT;
}

/* --- PCIe ------------------------------------------------------------------------------------------ */

int nvmlDeviceGetPciInfo_v3(gpu_t *device, pci_t *pci) {
    memset(pci, 0, sizeof *pci);
    snprintf(pci->bus_id, sizeof pci->bus_id, "%s", device->bus);
    memcpy(pci->bus_legacy, device->bus, sizeof pci->bus_legacy - 1); /* the legacy field is the id cut short */
    sscanf(device->bus, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    pci->pci_device_id = 0x233510de;
    return SUCCESS;
}

int nvmlDeviceGetCurrPcieLinkGeneration(gpu_t *device, unsigned int *out) { ANSWER("pcie", out, device->health.gen); }
int nvmlDeviceGetMaxPcieLinkGeneration(gpu_t *device, unsigned int *out) { ANSWER("pcie", out, device->health.gen_max); }
int nvmlDeviceGetCurrPcieLinkWidth(gpu_t *device, unsigned int *out) { ANSWER("pcie", out, device->health.width); }
int nvmlDeviceGetMaxPcieLinkWidth(gpu_t *device, unsigned int *out) { ANSWER("pcie", out, device->health.width_max); }
int nvmlDeviceGetPcieReplayCounter(gpu_t *device, unsigned int *out) { ANSWER("replays", out, device->health.replays); }
#ifndef OLD_DRIVER
int nvmlDeviceGetGpuMaxPcieLinkGeneration(gpu_t *device, unsigned int *out) { ANSWER("pcie", out, device->health.gpu_gen_max); }
#endif

/* --- modes, clocks, power ------------------------------------------------------------------------------ */

int nvmlDeviceGetPersistenceMode(gpu_t *device, int *out) { ANSWER("persistence", out, (int)device->health.persistence); }
int nvmlDeviceGetComputeMode(gpu_t *device, int *out) { ANSWER("compute", out, (int)device->health.compute); }
int nvmlDeviceGetCurrentClocksThrottleReasons(gpu_t *device, unsigned long long *out) {
    ANSWER("events", out, device->health.events | (device->util == 0 ? 0x1ULL : 0)); /* an idle GPU says so */
}
#ifndef OLD_DRIVER
int nvmlDeviceGetCurrentClocksEventReasons(gpu_t *device, unsigned long long *out) {
    return nvmlDeviceGetCurrentClocksThrottleReasons(device, out);
}
#endif
int nvmlDeviceGetEnforcedPowerLimit(gpu_t *device, unsigned int *out) { ANSWER("power", out, device->health.power_limit * 1000); }
int nvmlDeviceGetPowerManagementDefaultLimit(gpu_t *device, unsigned int *out) { ANSWER("power", out, device->health.power_default * 1000); }
int nvmlDeviceGetPowerUsage(gpu_t *device, unsigned int *out) { ANSWER("power", out, device->health.power_draw * 1000); }
int nvmlDeviceGetTemperature(gpu_t *device, int sensor, unsigned int *out) {
    if (sensor != 0) return INVALID_ARGUMENT;
    ANSWER("temperature", out, device->health.temp);
}

/* --- memory faults ------------------------------------------------------------------------------------ */

int nvmlDeviceGetEccMode(gpu_t *device, int *current, int *pending) {
    if (!supported(device, "ecc")) return NOT_SUPPORTED;
    *current = *pending = (int)device->health.ecc;
    return SUCCESS;
}

int nvmlDeviceGetTotalEccErrors(gpu_t *device, int type, int counter, unsigned long long *out) {
    const health_t *h = &device->health;
    if (!supported(device, "ecc") || !h->ecc) return NOT_SUPPORTED; /* no counters while ECC is off */
    if (type == 1) *out = counter == 0 ? h->dbe_volatile : h->dbe_aggregate;
    else *out = counter == 0 ? h->sbe_volatile : h->sbe_aggregate;
    return SUCCESS;
}

int nvmlDeviceGetRetiredPages(gpu_t *device, int cause, unsigned int *size, unsigned long long *addresses) {
    if (!supported(device, "retired")) return NOT_SUPPORTED;
    unsigned int pages = cause == 0 ? device->health.retired_sbe : device->health.retired_dbe;
    if (addresses == NULL || *size < pages) {
        int result = pages == 0 || *size >= pages ? SUCCESS : INSUFFICIENT_SIZE;
        *size = pages;
        return result;
    }
    for (unsigned int i = 0; i < pages; i++) addresses[i] = 0x1000ULL * (i + 1);
    *size = pages;
    return SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(gpu_t *device, int *out) { ANSWER("retired", out, (int)device->health.retired_pending); }

#ifndef OLD_DRIVER
int nvmlDeviceGetRemappedRows(gpu_t *device, unsigned int *corrected, unsigned int *uncorrected, unsigned int *pending,
                              unsigned int *failure) {
    const health_t *h = &device->health;
    if (!supported(device, "remap")) return NOT_SUPPORTED;
    *corrected = h->remap_corr;
    *uncorrected = h->remap_unc;
    *pending = h->remap_pending;
    *failure = h->remap_failure;
    return SUCCESS;
}
#endif

/* --- NVLink, fabric, processes ------------------------------------------------------------------------- */

int nvmlDeviceGetNvLinkState(gpu_t *device, unsigned int link, unsigned int *active) {
    if (!supported(device, "nvlink") || link >= device->health.nvlinks) return NOT_SUPPORTED;
    *active = link < 64 && (device->health.nvlink_down >> link) & 1 ? 0 : 1;
    return SUCCESS;
}

#ifndef OLD_DRIVER
int nvmlDeviceGetGpuFabricInfo(gpu_t *device, fabric_t *info) {
    if (!supported(device, "fabric")) return NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->state = device->health.fabric_state;
    info->status = (int)device->health.fabric_status;
    return SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(gpu_t *device, unsigned int *size, process_t *processes) {
    if (!supported(device, "processes")) return NOT_SUPPORTED;
    if (device->procs == 0) {
        *size = 0;
        return SUCCESS;
    }
    if (processes == NULL || *size < device->procs) {
        *size = device->procs;
        return INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < device->procs; i++) {
        processes[i].pid = device->pids[i];
        processes[i].used = device->proc_mib[i] << 20;
        processes[i].gpu_instance = processes[i].compute_instance = 0xFFFFFFFF;
    }
    *size = device->procs;
    return SUCCESS;
}
#endif

int nvmlInit(void) { return nvmlInitWithFlags(0); }
