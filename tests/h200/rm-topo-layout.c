/*
 * Sizes and offsets of the peer-topology controls' parameter structs, as gcc lays out
 * NVIDIA/open-gpu-kernel-modules' headers; daemon/src/nvrm/layout/topo.rs's tests
 * check the same numbers. Run against a tag's headers:
 *
 *   OGKM=$(mktemp -d)
 *   git -C open-gpu-kernel-modules archive 580.142 src/common/sdk/nvidia/inc | tar -x -C "$OGKM"
 *   gcc -w -I"$OGKM"/src/common/sdk/nvidia/inc -o lay tests/h200/rm-topo-layout.c && ./lay
 *
 * (570 and 575 have no NV2080_CTRL_NVLINK_LINK_MASK: drop those lines there.)
 */
#include <stdio.h>
#include <stddef.h>
#include "nvtypes.h"
#include "ctrl/ctrl0000/ctrl0000system.h"
#include "ctrl/ctrl2080/ctrl2080nvlink.h"
#define S(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define O(t,f) printf("  %s.%s %zu\n", #t, #f, offsetof(t,f))
int main(void){
 S(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,gpuCount);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,p2pCaps);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,p2pOptimalReadCEs);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,p2pOptimalWriteCEs);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,p2pCapsStatus);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,busPeerIds);
 O(NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS,busEgmPeerIds);
 S(NV2080_CTRL_NVLINK_LINK_MASK);
 S(NV2080_CTRL_NVLINK_DEVICE_INFO);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,domain);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,bus);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,device);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,function);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,pciDeviceId);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,deviceType);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,deviceUUID);
 O(NV2080_CTRL_NVLINK_DEVICE_INFO,fabricRecoveryStatusMask);
 S(NV2080_CTRL_NVLINK_LINK_STATUS_INFO);
#define L(f) O(NV2080_CTRL_NVLINK_LINK_STATUS_INFO,f)
 L(capsTbl);L(phyType);L(subLinkWidth);L(linkState);L(rxSublinkStatus);L(txSublinkStatus);L(bLaneReversal);
 L(nvlinkVersion);L(nciVersion);L(phyVersion);L(nvlinkLinkClockKHz);L(nvlinkCommonClockSpeedKHz);L(nvlinkRefClkSpeedKHz);
 L(nvlinkCommonClockSpeedMhz);L(nvlinkLineRateMbps);L(nvlinkLinkClockMhz);L(nvlinkRefClkType);L(nvlinkLinkDataRateKiBps);
 L(nvlinkRefClkSpeedMhz);L(connected);L(loopProperty);L(remoteDeviceLinkNumber);L(localDeviceLinkNumber);
 L(remoteLinkSid);L(localLinkSid);L(laneRxdetStatusMask);L(nvlinkMinL1Threshold);L(nvlinkMaxL1Threshold);L(nvlinkL1ThresholdUnits);
 L(remoteDeviceInfo);L(localDeviceInfo);
 S(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS_PARAMS);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS_PARAMS,enabledLinks);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS_PARAMS,bSublinkStateInst);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS_PARAMS,linkInfo);
 S(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS,discoveredLinkMask);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS,enabledLinkMask);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS,discoveredLinks);
 O(NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS,enabledLinks);
 printf("cmd status %#x caps %#x p2pv2 %#x\n", NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS, NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS, NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2);
}
