package semantics

import (
	"strconv"
	"syscall"
)

// PMError is a PCP error code (PM_ERR_* or a negated errno), as stored in an
// archive record in place of a metric's value count. Its Error text is
// pmErrStr's message (PCP 6.0.3).
type PMError int32

// Frequently met PCP error codes.
const (
	ErrPMID     PMError = -12358 // PM_ERR_PMID
	ErrValue    PMError = -12351 // PM_ERR_VALUE
	ErrEOL      PMError = -12370 // PM_ERR_EOL
	ErrPMIDLog  PMError = -12378 // PM_ERR_PMID_LOG
	ErrInDomLog PMError = -12379 // PM_ERR_INDOM_LOG
	ErrType     PMError = -12397 // PM_ERR_TYPE
	ErrAgain    PMError = -12389 // PM_ERR_AGAIN
	ErrNoAgent  PMError = -12386 // PM_ERR_NOAGENT
	ErrAppVer   PMError = -12350 // PM_ERR_APPVERSION
	ErrUnit     PMError = -12361 // PM_ERR_UNIT
	ErrConv     PMError = -12362 // PM_ERR_CONV
)

// pmErrText is `pmerr -l` of PCP 6.0.3.
var pmErrText = map[PMError]string{
	-12345: "Generic error, already reported above",
	-12346: "Problems parsing PMNS definitions",
	-12347: "PMNS not accessible",
	-12348: "Attempt to reload the PMNS",
	-12349: "One-line or help text is not available",
	-12350: "Metric not supported by this version of monitored application",
	-12351: "Missing metric value(s)",
	-12353: "Timeout waiting for a response from PMCD",
	-12354: "Empty archive log file",
	-12355: "PMCD reset or configuration change",
	-12357: "Unknown metric name",
	-12358: "Unknown or illegal metric identifier",
	-12359: "Unknown or illegal instance domain identifier",
	-12360: "Unknown or illegal instance identifier",
	-12397: "Unknown or illegal metric type",
	-12361: "Illegal pmUnits specification",
	-12362: "Impossible value or scale conversion",
	-12363: "Truncation in value conversion",
	-12364: "Negative value in conversion to unsigned",
	-12365: "Explicit instance identifier(s) required",
	-12366: "IPC protocol failure",
	-12414: "TLS protocol failure",
	-12368: "IPC channel closed",
	-12369: "Operation requires context with host source of metrics",
	-12370: "End of PCP archive log",
	-12371: "Illegal mode specification",
	-12372: "Illegal label record at start of a PCP archive log file",
	-12373: "Corrupted record in a PCP archive log",
	-12375: "Missing PCP archive log file",
	-12374: "Operation requires context with archive source of metrics",
	-12376: "Attempt to use an illegal context",
	-12377: "NULL pmInDom with non-NULL instlist",
	-12378: "Metric not defined in the PCP archive log",
	-12379: "Instance domain identifier not defined in the PCP archive log",
	-12380: "Instance identifier not defined in the PCP archive log",
	-12381: "Missing profile - protocol botch",
	-12386: "No PMCD agent for domain of request",
	-12387: "No permission to perform requested operation",
	-12388: "PMCD connection limit for this host exceeded",
	-12389: "Try again. Information not currently available",
	-12390: "Already Connected",
	-12391: "Not Connected",
	-12392: "A non-null port name is required",
	-12394: "Metric name is not a leaf in PMNS",
	-13394: "PMDA is not yet ready to respond to requests",
	-13393: "PMDA is now responsive to requests",
	-12442: "Internal inconsistency detected or assertion failed",
	-12443: "Insufficient elements in list",
	-12444: "Result size exceeded",
	-12445: "QA fault injected",
	-12398: "Operation not supported for multi-threaded applications",
	-12399: "Container not found",
	-12400: "Bad input to pmstore",
	-12401: "Archives overlap in time",
	-12402: "Archives differ by host",
	-12404: "The type of a metric has changed in an archive",
	-12405: "The semantics of a metric has changed in an archive",
	-12406: "The instance domain of a metric has changed in an archive",
	-12407: "The units of a metric have changed in an archive",
	-12408: "PMCD requires a client certificate",
	-12409: "Derived metric definition failed",
	-12410: "No support for metric label metadata",
	-12411: "PMDA is currently fenced and unable to respond to requests",
	-12412: "Incorrect record type in an archive",
	-12413: "Archive feature not supported",
	-21344: "Functionality not yet implemented",
}

// Error returns pmErrStr's text: the PCP message for PM_ERR_* codes, the
// system's strerror text for negated errno values.
func (e PMError) Error() string {
	if s, ok := pmErrText[e]; ok {
		return s
	}
	if e < 0 && e > -4096 {
		msg := syscall.Errno(-e).Error()
		if msg != "" && msg[0] >= 'a' && msg[0] <= 'z' {
			msg = string(msg[0]-'a'+'A') + msg[1:]
		}
		return msg
	}
	return "Unknown error " + strconv.Itoa(int(e))
}
