// edu-vfio: drives QEMU's edu device through VFIO type1 and checks what the IOMMU does.
//
// A stand-in for rig's own take-over and DMA code (issues to come replace it with rig):
// it proves the disposable machine's VFIO + vIOMMU path works before rig uses it.
//
//   edu-vfio dma BDF               map a buffer, DMA RAM -> edu -> RAM, compare the bytes;
//                                  unmap, DMA again, check the IOMMU blocked the write;
//                                  VFIO_DEVICE_RESET when the device offers it.
//   edu-vfio phys-dma BDF ADDR     through resource0 (rig's sysfs mode): DMA to and from the
//                                  physical address ADDR (a rig client's buffer).
//   edu-vfio bar-write BDF BAR TEXT  write TEXT at offset 0 of BAR (ivshmem: the host reads it).
//
// Output is one "CHECK ok: ..." or "CHECK FAIL: ..." line per step (the guest runner counts
// them); the exit status is the number of failed checks (capped at 100).
// edu registers: QEMU docs/specs/edu.rst. Trap: QEMU's edu aborts on a 4096-byte transfer
// (off-by-one range check), so transfers here stay below that.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/vfio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EDU_IDENT 0x00
#define EDU_LIVENESS 0x04
#define EDU_DMA_SRC 0x80
#define EDU_DMA_DST 0x88
#define EDU_DMA_COUNT 0x90
#define EDU_DMA_CMD 0x98
#define EDU_DMA_CMD_START 0x1
#define EDU_DMA_CMD_TO_RAM 0x2
#define EDU_DMA_BUFFER 0x40000 /* device-side address of edu's 4 KiB buffer */

#define IOVA 0x200000ULL
#define BUF_SIZE (2u << 20)
#define XFER 2048 /* < 4096: see the trap above */

static int failures;

static void check(int ok, const char *what) {
  if (ok) {
    printf("CHECK ok: %s\n", what);
  } else {
    printf("CHECK FAIL: %s (errno %d: %s)\n", what, errno, strerror(errno));
    failures++;
  }
  fflush(stdout);
}

struct vfio {
  int container, group, device;
};

// Opens BDF's IOMMU group, attaches a type1 container and returns the device fd in v.
static int vfio_open(const char *bdf, struct vfio *v) {
  char path[PATH_MAX], link[PATH_MAX];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/iommu_group", bdf);
  ssize_t n = readlink(path, link, sizeof link - 1);
  check(n > 0, "device has an IOMMU group");
  if (n <= 0) return -1;
  link[n] = 0;
  v->container = open("/dev/vfio/vfio", O_RDWR);
  check(v->container >= 0, "open /dev/vfio/vfio");
  check(ioctl(v->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) == 1, "VFIO type1v2 supported");
  snprintf(path, sizeof path, "/dev/vfio/%s", strrchr(link, '/') + 1);
  v->group = open(path, O_RDWR);
  check(v->group >= 0, "open the VFIO group");
  if (v->container < 0 || v->group < 0) return -1;
  struct vfio_group_status status = {.argsz = sizeof status};
  check(ioctl(v->group, VFIO_GROUP_GET_STATUS, &status) == 0 && (status.flags & VFIO_GROUP_FLAGS_VIABLE),
        "group is viable");
  check(ioctl(v->group, VFIO_GROUP_SET_CONTAINER, &v->container) == 0, "VFIO_GROUP_SET_CONTAINER");
  check(ioctl(v->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) == 0, "VFIO_SET_IOMMU type1v2");
  v->device = ioctl(v->group, VFIO_GROUP_GET_DEVICE_FD, bdf);
  check(v->device >= 0, "VFIO_GROUP_GET_DEVICE_FD");
  return v->device >= 0 ? 0 : -1;
}

static volatile uint8_t *map_bar(struct vfio *v, unsigned index, uint64_t *size) {
  struct vfio_region_info info = {.argsz = sizeof info, .index = index};
  if (ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, &info) || !(info.flags & VFIO_REGION_INFO_FLAG_MMAP)) {
    check(0, "BAR is mappable");
    return NULL;
  }
  void *p = mmap(NULL, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, v->device, info.offset);
  check(p != MAP_FAILED, "mmap the BAR");
  *size = info.size;
  return p == MAP_FAILED ? NULL : p;
}

// Sets MEM and BUS MASTER in the COMMAND register through the config region.
static void enable_bus_master(struct vfio *v) {
  struct vfio_region_info cfg = {.argsz = sizeof cfg, .index = VFIO_PCI_CONFIG_REGION_INDEX};
  uint16_t cmd = 0;
  int ok = ioctl(v->device, VFIO_DEVICE_GET_REGION_INFO, &cfg) == 0 && pread(v->device, &cmd, 2, cfg.offset + 4) == 2;
  cmd |= 0x6;
  check(ok && pwrite(v->device, &cmd, 2, cfg.offset + 4) == 2, "COMMAND |= MEMORY | BUS_MASTER");
}

static volatile uint8_t *bar;
static uint32_t rd32(uint64_t off) { return *(volatile uint32_t *)(bar + off); }
static void wr32(uint64_t off, uint32_t v) { *(volatile uint32_t *)(bar + off) = v; }
static void wr64(uint64_t off, uint64_t v) { *(volatile uint64_t *)(bar + off) = v; }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

// One edu DMA; 0 once the engine is idle again, -1 after 5 s (edu runs off a 100 ms timer).
static int edu_dma(uint64_t src, uint64_t dst, uint32_t count, int to_ram) {
  wr64(EDU_DMA_SRC, src);
  wr64(EDU_DMA_DST, dst);
  wr64(EDU_DMA_COUNT, count);
  wr32(EDU_DMA_CMD, EDU_DMA_CMD_START | (to_ram ? EDU_DMA_CMD_TO_RAM : 0));
  for (double t = now(); rd32(EDU_DMA_CMD) & EDU_DMA_CMD_START; usleep(1000))
    if (now() - t > 5) return -1;
  return 0;
}

static int cmd_dma(const char *bdf) {
  struct vfio v;
  if (vfio_open(bdf, &v)) return 1;
  uint64_t size;
  bar = map_bar(&v, VFIO_PCI_BAR0_REGION_INDEX, &size);
  if (!bar) return 1;
  enable_bus_master(&v);
  check((rd32(EDU_IDENT) & 0xff) == 0xed, "edu identification register reads 0x..ed");
  wr32(EDU_LIVENESS, 0x5a5aa5a5);
  check(rd32(EDU_LIVENESS) == ~0x5a5aa5a5u, "edu liveness register inverts");

  uint8_t *buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(buf != MAP_FAILED, "allocate the DMA buffer");
  if (buf == MAP_FAILED) return 1;
  memset(buf, 0, BUF_SIZE);
  struct vfio_iommu_type1_dma_map map = {.argsz = sizeof map,
                                         .flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
                                         .vaddr = (uintptr_t)buf, .iova = IOVA, .size = BUF_SIZE};
  check(ioctl(v.container, VFIO_IOMMU_MAP_DMA, &map) == 0, "VFIO_IOMMU_MAP_DMA 2 MiB at IOVA 0x200000");

  for (int i = 0; i < XFER; i++) buf[i] = (uint8_t)(i * 13 + 7);
  check(edu_dma(IOVA, EDU_DMA_BUFFER, XFER, 0) == 0, "edu DMA RAM -> device completes");
  check(edu_dma(EDU_DMA_BUFFER, IOVA + 0x10000, XFER, 1) == 0, "edu DMA device -> RAM completes");
  check(memcmp(buf, buf + 0x10000, XFER) == 0, "bytes that went RAM -> edu -> RAM match");

  struct vfio_iommu_type1_dma_unmap unmap = {.argsz = sizeof unmap, .iova = IOVA, .size = BUF_SIZE};
  check(ioctl(v.container, VFIO_IOMMU_UNMAP_DMA, &unmap) == 0, "VFIO_IOMMU_UNMAP_DMA");
  memset(buf + 0x20000, 0x55, XFER);
  edu_dma(EDU_DMA_BUFFER, IOVA + 0x20000, XFER, 1);
  int untouched = 1;
  for (int i = 0; i < XFER; i++) untouched &= buf[0x20000 + i] == 0x55;
  check(untouched, "after unmap the IOMMU blocks the device's write");
  printf("info: blocked write was to IOVA %#llx\n", IOVA + 0x20000);

  struct vfio_device_info info = {.argsz = sizeof info};
  ioctl(v.device, VFIO_DEVICE_GET_INFO, &info);
  if (info.flags & VFIO_DEVICE_FLAGS_RESET)
    check(ioctl(v.device, VFIO_DEVICE_RESET) == 0, "VFIO_DEVICE_RESET");
  else
    printf("info: %s offers no VFIO_DEVICE_RESET\n", bdf);
  return 0;
}

static int cmd_bar_write(const char *bdf, unsigned index, const char *text) {
  struct vfio v;
  if (vfio_open(bdf, &v)) return 1;
  uint64_t size;
  bar = map_bar(&v, index, &size);
  if (!bar) return 1;
  size_t n = strlen(text) + 1;
  check(n <= size, "text fits in the BAR");
  if (n > size) return 1;
  for (size_t i = 0; i < n; i++) bar[i] = (uint8_t)text[i];
  int same = 1;
  for (size_t i = 0; i < n; i++) same &= bar[i] == (uint8_t)text[i];
  check(same, "BAR reads back what was written");
  return 0;
}

// phys-dma BDF ADDR: edu held driverless by rig (sysfs mode, no IOMMU translation):
// map resource0, turn on bus mastering, DMA 256 bytes from physical ADDR into edu and
// back out to ADDR + 0x1000, then turn bus mastering off again. ADDR is a client's
// buffer as rig reported its device address; the client checks the bytes.
static int cmd_phys_dma(const char *bdf, uint64_t addr) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/resource0", bdf);
  int fd = open(path, O_RDWR | O_SYNC);
  check(fd >= 0, "open resource0");
  if (fd < 0) return 1;
  void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  check(p != MAP_FAILED, "mmap resource0");
  if (p == MAP_FAILED) return 1;
  bar = p;
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/config", bdf);
  int cfg = open(path, O_RDWR);
  uint16_t cmd = 0;
  check(cfg >= 0 && pread(cfg, &cmd, 2, 4) == 2, "read the command register");
  cmd |= 0x6;
  check(pwrite(cfg, &cmd, 2, 4) == 2, "command register: memory and bus master on");
  check((rd32(EDU_IDENT) & 0xff) == 0xed, "edu answers through resource0");
  check(edu_dma(addr, EDU_DMA_BUFFER, 256, 0) == 0, "edu DMA from the client's buffer (physical)");
  check(edu_dma(EDU_DMA_BUFFER, addr + 0x1000, 256, 1) == 0, "edu DMA into the client's buffer + 0x1000 (physical)");
  cmd &= (uint16_t)~0x4;
  check(pwrite(cfg, &cmd, 2, 4) == 2, "bus master off again");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "dma")) {
    cmd_dma(argv[2]);
  } else if (argc == 4 && !strcmp(argv[1], "phys-dma")) {
    cmd_phys_dma(argv[2], strtoull(argv[3], NULL, 0));
  } else if (argc == 5 && !strcmp(argv[1], "bar-write")) {
    cmd_bar_write(argv[2], (unsigned)atoi(argv[3]), argv[4]);
  } else {
    fprintf(stderr, "usage: %s dma BDF | phys-dma BDF ADDR | bar-write BDF BAR TEXT\n", argv[0]);
    return 2;
  }
  return failures > 100 ? 100 : failures;
}
