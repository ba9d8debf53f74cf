package pickle

// keyRole identifies a dict key the binder understands. Roles are computed
// once per distinct string while decoding, so binding switches on a small
// integer instead of comparing strings.
type keyRole uint8

const (
	keyUnknown keyRole = iota
	keyFilename
	keyLine
	keyName
	keySegments
	keyDeviceTraces
	keyTraces
	keyAllocatorSettings
	keyExternalAnnotations
	keyDevice
	keyAddress
	keyTotalSize
	keyAllocatedSize
	keyActiveSize
	keyRequestedSize
	keyStream
	keySegmentType
	keySegmentPoolID
	keyIsExpandable
	keyFrames
	keyBlocks
	keySize
	keyState
	keyHistory
	keyRealSize
	keyAddr
	keyAction
	keyTimeUS
	keyCompileContext
	keyUserMetadata
	keyDeviceFree
	keyPoolID
	keyForwardFrames
	keyStage
	keyFxNodeOp
	keyFxNodeName
	keyFxNodeTarget
	keyFxOriginalTrace
)

func roleOf(s string) keyRole {
	switch s {
	case "filename":
		return keyFilename
	case "line":
		return keyLine
	case "name":
		return keyName
	case "segments":
		return keySegments
	case "device_traces":
		return keyDeviceTraces
	case "traces":
		return keyTraces
	case "allocator_settings":
		return keyAllocatorSettings
	case "external_annotations":
		return keyExternalAnnotations
	case "device":
		return keyDevice
	case "address":
		return keyAddress
	case "total_size":
		return keyTotalSize
	case "allocated_size":
		return keyAllocatedSize
	case "active_size":
		return keyActiveSize
	case "requested_size":
		return keyRequestedSize
	case "stream":
		return keyStream
	case "segment_type":
		return keySegmentType
	case "segment_pool_id":
		return keySegmentPoolID
	case "is_expandable":
		return keyIsExpandable
	case "frames":
		return keyFrames
	case "blocks":
		return keyBlocks
	case "size":
		return keySize
	case "state":
		return keyState
	case "history":
		return keyHistory
	case "real_size":
		return keyRealSize
	case "addr":
		return keyAddr
	case "action":
		return keyAction
	case "time_us":
		return keyTimeUS
	case "compile_context":
		return keyCompileContext
	case "user_metadata":
		return keyUserMetadata
	case "device_free":
		return keyDeviceFree
	case "pool_id":
		return keyPoolID
	case "forward_frames":
		return keyForwardFrames
	case "stage":
		return keyStage
	case "fx_node_op":
		return keyFxNodeOp
	case "fx_node_name":
		return keyFxNodeName
	case "fx_node_target":
		return keyFxNodeTarget
	case "fx_original_trace":
		return keyFxOriginalTrace
	}
	return keyUnknown
}
