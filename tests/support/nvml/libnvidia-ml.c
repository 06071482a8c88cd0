/* A test double of NVIDIA's NVML library (libnvidia-ml.so.1), for the fleet tests: nvidia-ml-py loads
 * it through LD_LIBRARY_PATH as it would load the driver's. What it reports comes from environment
 * variables, read at nvmlInit:
 *   DD_NVML_DRIVER   the driver version ("550.54.15")
 *   DD_NVML_CUDA     the CUDA version the driver supports, as NVML encodes it (12040 = 12.4)
 *   DD_NVML_GPUS     one GPU per ';': name|memory MiB|PCI bus id|UUID|utilisation %
 *   DD_NVML_CC       the compute capability of every GPU ("9.0", the default: a Hopper part)
 *   DD_NVML_FAIL     when set, nvmlInit fails as it does without a driver (NVML_ERROR_DRIVER_NOT_LOADED)
 * A function this double does not define is NVML_ERROR_FUNCTION_NOT_FOUND to the binding, as on an old
 * driver; the code under test must cope with that anyway. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUCCESS 0
#define INVALID_ARGUMENT 2
#define NOT_SUPPORTED 3
#define INSUFFICIENT_SIZE 7
#define DRIVER_NOT_LOADED 9
#define MAX_GPUS 16

typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned int gpu, memory; } utilization_t;
typedef struct { char name[96]; unsigned long long mib; char bus[32]; char uuid[96]; unsigned int util; } gpu_t;

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

int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (getenv("DD_NVML_FAIL")) return DRIVER_NOT_LOADED;
    const char *spec = getenv("DD_NVML_GPUS");
    char copy[4096], number[32];
    count = 0;
    snprintf(copy, sizeof copy, "%s", spec ? spec : "");
    for (char *record = strtok(copy, ";"); record && count < MAX_GPUS; record = strtok(NULL, ";")) {
        gpu_t *gpu = &gpus[count++];
        char *cursor = record;
        field(&cursor, gpu->name, sizeof gpu->name);
        field(&cursor, number, sizeof number);
        gpu->mib = strtoull(number, NULL, 10);
        field(&cursor, gpu->bus, sizeof gpu->bus);
        field(&cursor, gpu->uuid, sizeof gpu->uuid);
        field(&cursor, number, sizeof number);
        gpu->util = (unsigned int)strtoul(number, NULL, 10);
    }
    return SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return SUCCESS; }
const char *nvmlErrorString(int result) { return result == DRIVER_NOT_LOADED ? "Driver Not Loaded" : "Unknown Error"; }

static int copy_text(const char *text, char *out, unsigned int size) {
    if (strlen(text) + 1 > size) return INSUFFICIENT_SIZE;
    strcpy(out, text);
    return SUCCESS;
}

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

int nvmlDeviceGetMemoryInfo(gpu_t *device, memory_t *memory) {
    memory->total = device->mib << 20;
    memory->used = 0;
    memory->free = memory->total;
    return SUCCESS;
}

int nvmlDeviceGetUtilizationRates(gpu_t *device, utilization_t *rates) {
    rates->gpu = device->util;
    rates->memory = device->util;
    return SUCCESS;
}

int nvmlDeviceGetMigMode(gpu_t *device, unsigned int *current, unsigned int *pending) {
    (void)device;
    *current = 0;
    *pending = 0;
    return SUCCESS;
}

int nvmlDeviceGetMaxClockInfo(gpu_t *device, int type, unsigned int *clock) {
    (void)device;
    (void)type;
    *clock = 2619;
    return SUCCESS;
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

int nvmlInit(void) { return nvmlInitWithFlags(0); }
