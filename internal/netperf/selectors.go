package netperf

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// netperf's output selectors (-o, -O, -k): each with the four lines of
// its column's heading and the format of its value, as netperf 2.7 prints
// them, in the order -o ? lists them.

type selector struct {
	name    string
	heading [4]string
	format  string
}

var selectors = []selector{
	{"OUTPUT_NONE", [4]string{" ", "", "", ""}, "%s"},
	{"SOCKET_TYPE", [4]string{"Socket", "Type", "", ""}, "%s"},
	{"PROTOCOL", [4]string{"Protocol", "", "", ""}, "%s"},
	{"DIRECTION", [4]string{"Direction", "", "", ""}, "%s"},
	{"ELAPSED_TIME", [4]string{"Elapsed", "Time", "(sec)", ""}, "%.2f"},
	{"THROUGHPUT", [4]string{"Throughput", "", "", ""}, "%.2f"},
	{"THROUGHPUT_UNITS", [4]string{"Throughput", "Units", "", ""}, "%s/s"},
	{"LSS_SIZE_REQ", [4]string{"Local", "Send Socket", "Size", "Requested"}, "%d"},
	{"LSS_SIZE", [4]string{"Local", "Send Socket", "Size", "Initial"}, "%d"},
	{"LSS_SIZE_END", [4]string{"Local", "Send Socket", "Size", "Final"}, "%d"},
	{"LSR_SIZE_REQ", [4]string{"Local", "Recv Socket", "Size", "Requested"}, "%d"},
	{"LSR_SIZE", [4]string{"Local", "Recv Socket", "Size", "Initial"}, "%d"},
	{"LSR_SIZE_END", [4]string{"Local", "Recv Socket", "Size", "Final"}, "%d"},
	{"RSS_SIZE_REQ", [4]string{"Remote", "Send Socket", "Size", "Requested"}, "%d"},
	{"RSS_SIZE", [4]string{"Remote", "Send Socket", "Size", "Initial"}, "%d"},
	{"RSS_SIZE_END", [4]string{"Remote", "Send Socket", "Size", "Final"}, "%d"},
	{"RSR_SIZE_REQ", [4]string{"Remote", "Recv Socket", "Size", "Requested"}, "%d"},
	{"RSR_SIZE", [4]string{"Remote", "Recv Socket", "Size", "Initial"}, "%d"},
	{"RSR_SIZE_END", [4]string{"Remote", "Recv Socket", "Size", "Final"}, "%d"},
	{"LOCAL_SEND_SIZE", [4]string{"Local", "Send", "Size", ""}, "%d"},
	{"LOCAL_RECV_SIZE", [4]string{"Local", "Recv", "Size", ""}, "%d"},
	{"REMOTE_SEND_SIZE", [4]string{"Remote", "Send", "Size", ""}, "%d"},
	{"REMOTE_RECV_SIZE", [4]string{"Remote", "Recv", "Size", ""}, "%d"},
	{"REQUEST_SIZE", [4]string{"Request", "Size", "Bytes", ""}, "%d"},
	{"RESPONSE_SIZE", [4]string{"Response", "Size", "Bytes", ""}, "%d"},
	{"LOCAL_CPU_UTIL", [4]string{"Local", "CPU", "Util", "%"}, "%.2f"},
	{"LOCAL_CPU_PERCENT_USER", [4]string{"Local", "CPU", "User", "%"}, "%.2f"},
	{"LOCAL_CPU_PERCENT_SYSTEM", [4]string{"Local", "CPU", "System", "%"}, "%.2f"},
	{"LOCAL_CPU_PERCENT_IOWAIT", [4]string{"Local", "CPU", "I/O", "%"}, "%.2f"},
	{"LOCAL_CPU_PERCENT_IRQ", [4]string{"Local", "CPU", "IRQ", "%"}, "%.2f"},
	{"LOCAL_CPU_PERCENT_SWINTR", [4]string{"Local", "CPU", "swintr", "%"}, "%.2f"},
	{"LOCAL_CPU_METHOD", [4]string{"Local", "CPU", "Util", "Method"}, "%c"},
	{"LOCAL_SD", [4]string{"Local", "Service", "Demand", ""}, "%.3f"},
	{"REMOTE_CPU_UTIL", [4]string{"Remote", "CPU", "Util", "%"}, "%.2f"},
	{"REMOTE_CPU_PERCENT_USER", [4]string{"Remote", "CPU", "User", "%"}, "%.2f"},
	{"REMOTE_CPU_PERCENT_SYSTEM", [4]string{"Remote", "CPU", "System", "%"}, "%.2f"},
	{"REMOTE_CPU_PERCENT_IOWAIT", [4]string{"Remote", "CPU", "I/O", "%"}, "%.2f"},
	{"REMOTE_CPU_PERCENT_IRQ", [4]string{"Remote", "CPU", "IRQ", "%"}, "%.2f"},
	{"REMOTE_CPU_PERCENT_SWINTR", [4]string{"Remote", "CPU", "swintr", "%"}, "%.2f"},
	{"REMOTE_CPU_METHOD", [4]string{"Remote", "CPU", "Util", "Method"}, "%c"},
	{"REMOTE_SD", [4]string{"Remote", "Service", "Demand", ""}, "%.3f"},
	{"SD_UNITS", [4]string{"Service", "Demand", "Units", ""}, "%s"},
	{"CONFIDENCE_LEVEL", [4]string{"Confidence", "Level", "Percent", ""}, "%d"},
	{"CONFIDENCE_INTERVAL", [4]string{"Confidence", "Width", "Target", ""}, "%f"},
	{"CONFIDENCE_ITERATION", [4]string{"Confidence", "Iterations", "Run", ""}, "%d"},
	{"THROUGHPUT_CONFID", [4]string{"Throughput", "Confidence", "Width (%)", ""}, "%.3f"},
	{"LOCAL_CPU_CONFID", [4]string{"Local", "CPU", "Confidence", "Width (%)"}, "%.3f"},
	{"REMOTE_CPU_CONFID", [4]string{"Remote", "CPU", "Confidence", "Width (%)"}, "%.3f"},
	{"TRANSACTION_RATE", [4]string{"Transaction", "Rate", "Tran/s", ""}, "%.3f"},
	{"RT_LATENCY", [4]string{"Round", "Trip", "Latency", "usec/tran"}, "%.3f"},
	{"BURST_SIZE", [4]string{"Initial", "Burst", "Requests", ""}, "%d"},
	{"LOCAL_TRANSPORT_RETRANS", [4]string{"Local", "Transport", "Retransmissions", ""}, "%d"},
	{"REMOTE_TRANSPORT_RETRANS", [4]string{"Remote", "Transport", "Retransmissions", ""}, "%d"},
	{"TRANSPORT_MSS", [4]string{"Transport", "MSS", "bytes", ""}, "%d"},
	{"LOCAL_SEND_THROUGHPUT", [4]string{"Local", "Send", "Throughput", ""}, "%.2f"},
	{"LOCAL_RECV_THROUGHPUT", [4]string{"Local", "Recv", "Throughput", ""}, "%.2f"},
	{"REMOTE_SEND_THROUGHPUT", [4]string{"Remote", "Send", "Throughput", ""}, "%.2f"},
	{"REMOTE_RECV_THROUGHPUT", [4]string{"Remote", "Recv", "Throughput", ""}, "%.2f"},
	{"LOCAL_CPU_BIND", [4]string{"Local", "CPU", "Bind", ""}, "%d"},
	{"LOCAL_CPU_COUNT", [4]string{"Local", "CPU", "Count", ""}, "%d"},
	{"LOCAL_CPU_PEAK_UTIL", [4]string{"Local", "Peak", "Per CPU", "Util %"}, "%.2f"},
	{"LOCAL_CPU_PEAK_ID", [4]string{"Local", "Peak", "Per CPU", "ID"}, "%d"},
	{"LOCAL_CPU_MODEL", [4]string{"Local", "CPU", "Model", ""}, "%s"},
	{"LOCAL_CPU_FREQUENCY", [4]string{"Local", "CPU", "Frequency", "MHz"}, "%d"},
	{"REMOTE_CPU_BIND", [4]string{"Remote", "CPU", "Bind", ""}, "%d"},
	{"REMOTE_CPU_COUNT", [4]string{"Remote", "CPU", "Count", ""}, "%d"},
	{"REMOTE_CPU_PEAK_UTIL", [4]string{"Remote", "Peak", "Per CPU", "Util %"}, "%.2f"},
	{"REMOTE_CPU_PEAK_ID", [4]string{"Remote", "Peak", "Per CPU", "ID"}, "%d"},
	{"REMOTE_CPU_MODEL", [4]string{"Remote", "CPU", "Model", ""}, "%s"},
	{"REMOTE_CPU_FREQUENCY", [4]string{"Remote", "CPU", "Frequency", "MHz"}, "%d"},
	{"SOURCE_PORT", [4]string{"Source", "Port", "", ""}, "%s"},
	{"SOURCE_ADDR", [4]string{"Source", "Address", "", ""}, "%s"},
	{"SOURCE_FAMILY", [4]string{"Source", "Family", "", ""}, "%d"},
	{"DEST_PORT", [4]string{"Destination", "Port", "", ""}, "%s"},
	{"DEST_ADDR", [4]string{"Destination", "Address", "", ""}, "%s"},
	{"DEST_FAMILY", [4]string{"Destination", "Family", "", ""}, "%d"},
	{"LOCAL_SEND_CALLS", [4]string{"Local", "Send", "Calls", ""}, "%d"},
	{"LOCAL_RECV_CALLS", [4]string{"Local", "Recv", "Calls", ""}, "%d"},
	{"LOCAL_BYTES_PER_RECV", [4]string{"Local", "Bytes", "Per", "Recv"}, "%.2f"},
	{"LOCAL_BYTES_PER_SEND", [4]string{"Local", "Bytes", "Per", "Send"}, "%.2f"},
	{"LOCAL_BYTES_SENT", [4]string{"Local", "Bytes", "Sent", ""}, "%d"},
	{"LOCAL_BYTES_RECVD", [4]string{"Local", "Bytes", "Received", ""}, "%d"},
	{"LOCAL_BYTES_XFERD", [4]string{"Local", "Bytes", "Xferred", ""}, "%.0f"},
	{"LOCAL_SEND_OFFSET", [4]string{"Local", "Send", "Offset", ""}, "%d"},
	{"LOCAL_RECV_OFFSET", [4]string{"Local", "Recv", "Offset", ""}, "%d"},
	{"LOCAL_SEND_ALIGN", [4]string{"Local", "Send", "Alignment", ""}, "%d"},
	{"LOCAL_RECV_ALIGN", [4]string{"Local", "Recv", "Alignment", ""}, "%d"},
	{"LOCAL_SEND_WIDTH", [4]string{"Local", "Send", "Width", ""}, "%d"},
	{"LOCAL_RECV_WIDTH", [4]string{"Local", "Recv", "Width", ""}, "%d"},
	{"LOCAL_SEND_DIRTY_COUNT", [4]string{"Local", "Send", "Dirty", "Count"}, "%d"},
	{"LOCAL_RECV_DIRTY_COUNT", [4]string{"Local", "Recv", "Dirty", "Count"}, "%d"},
	{"LOCAL_RECV_CLEAN_COUNT", [4]string{"Local", "Recv", "Clean", "Count"}, "%d"},
	{"LOCAL_NODELAY", [4]string{"Local", "NODELAY", "", ""}, "%d"},
	{"LOCAL_CORK", [4]string{"Local", "Cork", "", ""}, "%d"},
	{"REMOTE_SEND_CALLS", [4]string{"Remote", "Send", "Calls", ""}, "%d"},
	{"REMOTE_RECV_CALLS", [4]string{"Remote", "Recv", "Calls", ""}, "%d"},
	{"REMOTE_BYTES_PER_RECV", [4]string{"Remote", "Bytes", "Per", "Recv"}, "%.2f"},
	{"REMOTE_BYTES_PER_SEND", [4]string{"Remote", "Bytes", "Per", "Send"}, "%.2f"},
	{"REMOTE_BYTES_SENT", [4]string{"Remote", "Bytes", "Sent", ""}, "%d"},
	{"REMOTE_BYTES_RECVD", [4]string{"Remote", "Bytes", "Received", ""}, "%d"},
	{"REMOTE_BYTES_XFERD", [4]string{"Remote", "Bytes", "Xferred", ""}, "%.0f"},
	{"REMOTE_SEND_OFFSET", [4]string{"Remote", "Send", "Offset", ""}, "%d"},
	{"REMOTE_RECV_OFFSET", [4]string{"Remote", "Recv", "Offset", ""}, "%d"},
	{"REMOTE_SEND_ALIGN", [4]string{"Remote", "Send", "Alignment", ""}, "%d"},
	{"REMOTE_RECV_ALIGN", [4]string{"Remote", "Recv", "Alignment", ""}, "%d"},
	{"REMOTE_SEND_WIDTH", [4]string{"Remote", "Send", "Width", ""}, "%d"},
	{"REMOTE_RECV_WIDTH", [4]string{"Remote", "Recv", "Width", ""}, "%d"},
	{"REMOTE_SEND_DIRTY_COUNT", [4]string{"Remote", "Send", "Dirty", "Count"}, "%d"},
	{"REMOTE_RECV_DIRTY_COUNT", [4]string{"Remote", "Recv", "Dirty", "Count"}, "%d"},
	{"REMOTE_RECV_CLEAN_COUNT", [4]string{"Remote", "Recv", "Clean", "Count"}, "%d"},
	{"REMOTE_NODELAY", [4]string{"Remote", "NODELAY", "", ""}, "%d"},
	{"REMOTE_CORK", [4]string{"Remote", "Cork", "", ""}, "%d"},
	{"LOCAL_SYSNAME", [4]string{"Local", "Sysname", "", ""}, "%s"},
	{"LOCAL_SYSTEM_MODEL", [4]string{"Local", "System", "Model", ""}, "%s"},
	{"LOCAL_RELEASE", [4]string{"Local", "Release", "", ""}, "%s"},
	{"LOCAL_VERSION", [4]string{"Local", "Version", "", ""}, "%s"},
	{"LOCAL_MACHINE", [4]string{"Local", "Machine", "", ""}, "%s"},
	{"REMOTE_SYSNAME", [4]string{"Remote", "Sysname", "", ""}, "%s"},
	{"REMOTE_SYSTEM_MODEL", [4]string{"Remote", "System", "Model", ""}, "%s"},
	{"REMOTE_RELEASE", [4]string{"Remote", "Release", "", ""}, "%s"},
	{"REMOTE_VERSION", [4]string{"Remote", "Version", "", ""}, "%s"},
	{"REMOTE_MACHINE", [4]string{"Remote", "Machine", "", ""}, "%s"},
	{"LOCAL_INTERFACE_NAME", [4]string{"Local", "Interface", "Name", ""}, "%s"},
	{"LOCAL_INTERFACE_VENDOR", [4]string{"Local", "Interface", "Vendor", ""}, "0x%.4x"},
	{"LOCAL_INTERFACE_DEVICE", [4]string{"Local", "Interface", "Device", ""}, "0x%.4x"},
	{"LOCAL_INTERFACE_SUBVENDOR", [4]string{"Local", "Interface", "Subvendor", ""}, "0x%.4x"},
	{"LOCAL_INTERFACE_SUBDEVICE", [4]string{"Local", "Interface", "Subdevice", ""}, "0x%.4x"},
	{"LOCAL_DRIVER_NAME", [4]string{"Local", "Driver", "Name", ""}, "%s"},
	{"LOCAL_DRIVER_VERSION", [4]string{"Local", "Driver", "Version", ""}, "%s"},
	{"LOCAL_DRIVER_FIRMWARE", [4]string{"Local", "Driver", "Firmware", ""}, "%s"},
	{"LOCAL_DRIVER_BUS", [4]string{"Local", "Driver", "Bus", ""}, "%s"},
	{"LOCAL_INTERFACE_SLOT", [4]string{"Local", "Interface", "Slot", ""}, "%s"},
	{"REMOTE_INTERFACE_NAME", [4]string{"Remote", "Interface", "Name", ""}, "%s"},
	{"REMOTE_INTERFACE_VENDOR", [4]string{"Remote", "Interface", "Vendor", ""}, "0x%.4x"},
	{"REMOTE_INTERFACE_DEVICE", [4]string{"Remote", "Interface", "Device", ""}, "0x%.4x"},
	{"REMOTE_INTERFACE_SUBVENDOR", [4]string{"Remote", "Interface", "Subvendor", ""}, "0x%.4x"},
	{"REMOTE_INTERFACE_SUBDEVICE", [4]string{"Remote", "Interface", "Subdevice", ""}, "0x%.4x"},
	{"REMOTE_DRIVER_NAME", [4]string{"Remote", "Driver", "Name", ""}, "%s"},
	{"REMOTE_DRIVER_VERSION", [4]string{"Remote", "Driver", "Version", ""}, "%s"},
	{"REMOTE_DRIVER_FIRMWARE", [4]string{"Remote", "Driver", "Firmware", ""}, "%s"},
	{"REMOTE_DRIVER_BUS", [4]string{"Remote", "Driver", "Bus", ""}, "%s"},
	{"REMOTE_INTERFACE_SLOT", [4]string{"Remote", "Interface", "Slot", ""}, "%s"},
	{"LOCAL_INTERVAL_USECS", [4]string{"Local", "Interval", "Usecs", ""}, "%d"},
	{"LOCAL_INTERVAL_BURST", [4]string{"Local", "Interval", "Burst", ""}, "%d"},
	{"REMOTE_INTERVAL_USECS", [4]string{"Remote", "Interval", "Usecs", ""}, "%d"},
	{"REMOTE_INTERVAL_BURST", [4]string{"Remote", "Interval", "Burst", ""}, "%d"},
	{"LOCAL_SECURITY_TYPE_ID", [4]string{"Local", "OS", "Security", "Type ID"}, "%d"},
	{"LOCAL_SECURITY_TYPE", [4]string{"Local", "OS", "Security", "Type"}, "%s"},
	{"LOCAL_SECURITY_ENABLED_NUM", [4]string{"Local", "OS", "Security", "Enabled Num"}, "%d"},
	{"LOCAL_SECURITY_ENABLED", [4]string{"Local", "OS", "Security", "Enabled"}, "%s"},
	{"LOCAL_SECURITY_SPECIFIC", [4]string{"Local", "OS", "Security", "Specific"}, "%s"},
	{"REMOTE_SECURITY_TYPE_ID", [4]string{"Remote", "OS", "Security", "Type"}, "%d"},
	{"REMOTE_SECURITY_TYPE", [4]string{"Remote", "OS", "Security", "Type"}, "%s"},
	{"REMOTE_SECURITY_ENABLED_NUM", [4]string{"Remote", "OS", "Security", "Enabled"}, "%d"},
	{"REMOTE_SECURITY_ENABLED", [4]string{"Remote", "OS", "Security", "Enabled"}, "%s"},
	{"REMOTE_SECURITY_SPECIFIC", [4]string{"Remote", "OS", "Security", "Specific"}, "%s"},
	{"RESULT_BRAND", [4]string{"Result", "Tag", "", ""}, "\"%s\""},
	{"UUID", [4]string{"Test", "UUID", "", ""}, "%s"},
	{"MIN_LATENCY", [4]string{"Minimum", "Latency", "Microseconds", ""}, "%d"},
	{"MAX_LATENCY", [4]string{"Maximum", "Latency", "Microseconds", ""}, "%d"},
	{"P50_LATENCY", [4]string{"50th", "Percentile", "Latency", "Microseconds"}, "%d"},
	{"P90_LATENCY", [4]string{"90th", "Percentile", "Latency", "Microseconds"}, "%d"},
	{"P99_LATENCY", [4]string{"99th", "Percentile", "Latency", "Microseconds"}, "%d"},
	{"MEAN_LATENCY", [4]string{"Mean", "Latency", "Microseconds", ""}, "%.2f"},
	{"STDDEV_LATENCY", [4]string{"Stddev", "Latency", "Microseconds", ""}, "%.2f"},
	{"LOCAL_SOCKET_PRIO", [4]string{"Local", "Socket", "Priority", ""}, "%d"},
	{"REMOTE_SOCKET_PRIO", [4]string{"Remote", "Socket", "Priority", ""}, "%d"},
	{"LOCAL_SOCKET_TOS", [4]string{"Local", "Socket", "TOS", ""}, "0x%.2x"},
	{"REMOTE_SOCKET_TOS", [4]string{"Remote", "Socket", "TOS", ""}, "0x%.2x"},
	{"LOCAL_CONG_CONTROL", [4]string{"Local", "Congestion", "Control", "Algorithm"}, "%s"},
	{"REMOTE_CONG_CONTROL", [4]string{"Remote", "Congestion", "Control", "Algorithm"}, "%s"},
	{"LOCAL_FILL_FILE", [4]string{"Local", "Fill", "File", ""}, "%s"},
	{"REMOTE_FILL_FILE", [4]string{"Remote", "Fill", "File", ""}, "%s"},
	{"COMMAND_LINE", [4]string{"Command", "Line", "", ""}, "\"%s\""},
	{"OUTPUT_END", [4]string{"This", "Is", "The", "End"}, "%s"}}

var selectorIndex = func() map[string]*selector {
	m := make(map[string]*selector, len(selectors))
	for i := range selectors {
		m[selectors[i].name] = &selectors[i]
	}
	return m
}()

// selectorByName finds a selector, whatever its case, as netperf does.
func selectorByName(name string) *selector { return selectorIndex[strings.ToUpper(name)] }

// SelectorNames lists every selector, as -o ? prints them.
func SelectorNames() []string {
	names := make([]string, len(selectors))
	for i, s := range selectors {
		names[i] = s.name
	}
	return names
}

// allSelectors is "-o all": every selector but the two markers.
func allSelectors() []string {
	var names []string
	for _, s := range selectors {
		if s.name != "OUTPUT_NONE" && s.name != "OUTPUT_END" {
			names = append(names, s.name)
		}
	}
	return names
}

// defaultSelectors is what -o, -O and -k print without a selection,
// and what an OMNI test prints without any: by the test's direction,
// with the CPU columns when -c or -C asked for them.
func defaultSelectors(c *Config) [][]string {
	tput := []string{"ELAPSED_TIME", "THROUGHPUT", "THROUGHPUT_UNITS"}
	cpu := []string{"LOCAL_CPU_UTIL", "LOCAL_CPU_PERCENT_USER", "LOCAL_CPU_PERCENT_SYSTEM", "LOCAL_CPU_PERCENT_IOWAIT",
		"LOCAL_CPU_PERCENT_IRQ", "LOCAL_CPU_PERCENT_SWINTR", "LOCAL_CPU_METHOD", "REMOTE_CPU_UTIL", "REMOTE_CPU_PERCENT_USER",
		"REMOTE_CPU_PERCENT_SYSTEM", "REMOTE_CPU_PERCENT_IOWAIT", "REMOTE_CPU_PERCENT_IRQ", "REMOTE_CPU_PERCENT_SWINTR",
		"REMOTE_CPU_METHOD", "LOCAL_SD", "REMOTE_SD", "SD_UNITS"}
	var l []string
	switch c.Test {
	case TCPStream, UDPStream:
		l = []string{"LSS_SIZE_END", "RSR_SIZE_END", "LOCAL_SEND_SIZE"}
	case TCPMaerts, UDPMaerts:
		l = []string{"RSS_SIZE_END", "LSR_SIZE_END", "REMOTE_SEND_SIZE"}
	default:
		l = []string{"LSS_SIZE_END", "LSR_SIZE_END", "RSR_SIZE_END", "RSS_SIZE_END", "REQUEST_SIZE", "RESPONSE_SIZE"}
	}
	l = append(l, tput...)
	if c.LocalCPU || c.RemoteCPU {
		l = append(l, cpu...)
	}
	return [][]string{l}
}

// newUUID is a test's identifier when -u gives none (random, version 4).
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
