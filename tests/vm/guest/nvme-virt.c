/* nvme-virt: the NVMe admin commands that set up SR-IOV secondary controllers, sent
 * through the kernel nvme driver's admin passthrough (the PF stays with that driver;
 * nvme-cli's `nvme virt-mgmt` and `nvme list-secondary` do the same). The disposable
 * machine has no nvme-cli, so its scenarios use this.
 *
 *   nvme-virt DEV caps                  Identify CNS 0x14: primary controller capabilities
 *   nvme-virt DEV list                  Identify CNS 0x15: secondary controller list
 *   nvme-virt DEV mgmt CNTLID RT ACT NR Virtualization Management (opcode 0x1c)
 *   nvme-virt DEV reset                 controller reset (NVME_IOCTL_RESET)
 *
 * DEV is the controller's character device (/dev/nvmeN). RT 0 = VQ, 1 = VI resources;
 * ACT 1 = primary flexible allocation, 7 = secondary offline, 8 = secondary assign,
 * 9 = secondary online. Reference: NVMe Base Specification 1.4 §5.22 (Virtualization
 * Management), the Primary Controller Capabilities (CNS 14h: VQFRT at byte 32, VIFRT
 * at 64) and Secondary Controller List (CNS 15h: entries of 32 bytes from byte 32); QEMU docs/system/devices/nvme.rst
 * "SR-IOV"; linux/nvme_ioctl.h for the passthrough. */
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static uint16_t u16at(const uint8_t *b, int o) { return b[o] | b[o + 1] << 8; }
static uint32_t u32at(const uint8_t *b, int o) { return u16at(b, o) | (uint32_t)u16at(b, o + 2) << 16; }

static int admin(int fd, uint8_t opc, uint32_t cdw10, uint32_t cdw11, void *buf, uint32_t len) {
	struct nvme_admin_cmd c;
	memset(&c, 0, sizeof c);
	c.opcode = opc;
	c.addr = (uint64_t)(uintptr_t)buf;
	c.data_len = len;
	c.cdw10 = cdw10;
	c.cdw11 = cdw11;
	c.timeout_ms = 5000;
	int r = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
	if (r < 0) { perror("admin command"); return -1; }
	if (r > 0) { fprintf(stderr, "admin command 0x%02x failed: status 0x%x\n", opc, r); return -1; }
	return 0;
}

int main(int argc, char **argv) {
	static uint8_t buf[4096];
	if (argc < 3) { fprintf(stderr, "usage: nvme-virt DEV caps|list|mgmt CNTLID RT ACT NR|reset\n"); return 2; }
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) { perror(argv[1]); return 1; }
	if (!strcmp(argv[2], "caps")) {
		if (admin(fd, 0x06, 0x14, 0, buf, sizeof buf)) return 1;
		printf("cntlid %u vqfrt %u vqrfa %u vqrfap %u vqprt %u vqfrsm %u vifrt %u virfa %u virfap %u viprt %u vifrsm %u\n",
		       u16at(buf, 0), u32at(buf, 32), u32at(buf, 36), u16at(buf, 40), u16at(buf, 42), u16at(buf, 44),
		       u32at(buf, 64), u32at(buf, 68), u16at(buf, 72), u16at(buf, 74), u16at(buf, 76));
	} else if (!strcmp(argv[2], "list")) {
		if (admin(fd, 0x06, 0x15, 0, buf, sizeof buf)) return 1;
		for (int i = 0; i < buf[0] && i < 127; i++) {
			const uint8_t *e = buf + 32 + 32 * i;
			printf("scid %u pcid %u online %u vfn %u nvq %u nvi %u\n", u16at(e, 0), u16at(e, 2), e[4] & 1,
			       u16at(e, 8), u16at(e, 10), u16at(e, 12));
		}
	} else if (!strcmp(argv[2], "mgmt") && argc == 7) {
		uint32_t cntlid = strtoul(argv[3], 0, 0), rt = strtoul(argv[4], 0, 0), act = strtoul(argv[5], 0, 0);
		uint32_t nr = strtoul(argv[6], 0, 0);
		if (admin(fd, 0x1c, (act & 0xf) | (rt & 7) << 8 | cntlid << 16, nr & 0xffff, 0, 0)) return 1;
		printf("ok mgmt cntlid %u rt %u act %u nr %u\n", cntlid, rt, act, nr);
	} else if (!strcmp(argv[2], "reset")) {
		if (ioctl(fd, NVME_IOCTL_RESET) < 0) { perror("reset"); return 1; }
		printf("ok reset\n");
	} else {
		fprintf(stderr, "unknown command %s\n", argv[2]);
		return 2;
	}
	return 0;
}
