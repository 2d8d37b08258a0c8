// csi-test-driver is the storage backend for csi-handover's tests: a small CSI controller plugin that the real
// upstream sidecars talk to over gRPC. csi-driver-host-path is not served by the module proxy this project
// builds from, so this stands in for it on the controller side. It keeps no state: volume and snapshot IDs
// encode everything later calls need, so any replica answers any call the same way, as a real backend would.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const defaultCapacity = 1 << 30

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	name, nodeID string
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:16]
}

// Volume IDs depend only on the name, so a retried CreateVolume is idempotent on every replica.
func volumeID(name string) string { return "vol-" + shortHash(name) }

// volumeFor decodes a volume ID made by volumeID. The ID carries no size or content source, so the volume comes
// back with CapacityBytes 0 (unknown, as the CSI spec allows) and no ContentSource.
func volumeFor(id string) (*csi.Volume, bool) {
	hash, ok := strings.CutPrefix(id, "vol-")
	if !ok || len(hash) != 16 {
		return nil, false
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return nil, false
	}
	return &csi.Volume{VolumeId: id}, true
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "v0.1.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_VOLUME_CONDITION,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name missing")
	}
	capacity := req.GetCapacityRange().GetRequiredBytes()
	if capacity == 0 {
		capacity = defaultCapacity
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      volumeID(req.GetName()),
		CapacityBytes: capacity,
		ContentSource: req.GetVolumeContentSource(),
	}}, nil
}

func (d *driver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (d *driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if req.GetVolumeId() == "" || req.GetNodeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume or node id missing")
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"device": "/dev/fake-" + req.GetVolumeId()}}, nil
}

func (d *driver) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ControllerGetVolume is what csi-external-health-monitor-controller polls (GET_VOLUME + VOLUME_CONDITION). Every
// volume it can decode is healthy; PublishedNodeIds stays empty because no replica keeps attachment state.
func (d *driver) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id missing")
	}
	vol, ok := volumeFor(req.GetVolumeId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: vol,
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{
			VolumeCondition: &csi.VolumeCondition{Abnormal: false, Message: "healthy"},
		},
	}, nil
}

func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes(), NodeExpansionRequired: false}, nil
}

// Snapshot IDs are "snap-<hash of name>~<source volume id>" so ListSnapshots can answer for any ID.
func snapshotFor(id string) (*csi.Snapshot, bool) {
	rest, ok := strings.CutPrefix(id, "snap-")
	if !ok {
		return nil, false
	}
	_, source, ok := strings.Cut(rest, "~")
	if !ok {
		return nil, false
	}
	return &csi.Snapshot{SnapshotId: id, SourceVolumeId: source, SizeBytes: defaultCapacity, ReadyToUse: true,
		CreationTime: timestamppb.New(time.Unix(0, 0))}, true
}

func (d *driver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" || req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "name or source volume missing")
	}
	snap, _ := snapshotFor("snap-" + shortHash(req.GetName()) + "~" + req.GetSourceVolumeId())
	snap.CreationTime = timestamppb.Now()
	return &csi.CreateSnapshotResponse{Snapshot: snap}, nil
}

func (d *driver) DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *driver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	resp := &csi.ListSnapshotsResponse{}
	if snap, ok := snapshotFor(req.GetSnapshotId()); ok {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snap})
	}
	return resp, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func main() {
	endpoint := flag.String("endpoint", "unix:///csi/csi.sock", "CSI endpoint")
	name := flag.String("drivername", "hostpath.csi.k8s.io", "CSI driver name")
	nodeID := flag.String("nodeid", "", "node id (required)")
	flag.Int("v", 2, "log verbosity (accepted for klog compatibility)")
	flag.Parse()
	if *nodeID == "" {
		log.Fatal("--nodeid is required")
	}
	u, err := url.Parse(*endpoint)
	if err != nil || u.Scheme != "unix" {
		log.Fatalf("endpoint %q: only unix:// is supported", *endpoint)
	}
	path := u.Path
	if path == "" {
		path = u.Host + u.Opaque
	}
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listen %s: %v", path, err)
	}
	d := &driver{name: *name, nodeID: *nodeID}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		log.Printf("%s err=%v", info.FullMethod, err)
		return resp, err
	}))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { s := <-sigs; log.Printf("received %v, stopping", s); srv.GracefulStop() }()
	log.Printf("csi-test-driver %s node %s listening on %s (pid %s)", *name, *nodeID, path, strconv.Itoa(os.Getpid()))
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stderr, "stopped")
}
