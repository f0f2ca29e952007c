package s3api

import (
	"encoding/xml"
	"net/http"
	"strconv"
)

// writeXML answers v as an XML document with status.
func writeXML(w http.ResponseWriter, status int, v any) {
	out, err := xml.Marshal(v)
	if err != nil { // only for types that cannot be marshalled: a bug
		status = http.StatusInternalServerError
		out, _ = xml.Marshal(errorBody{Code: internalError.code, Message: "could not encode the answer"})
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(out)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// copyObjectResult is CopyObject's answer.
type copyObjectResult struct {
	XMLName      struct{} `xml:"CopyObjectResult"`
	ETag         string   `xml:"ETag"`
	LastModified string   `xml:"LastModified"`
}

// deleteRequest is DeleteObjects' body.
type deleteRequest struct {
	XMLName struct{} `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

// deleteResult is DeleteObjects' answer.
type deleteResult struct {
	XMLName xml.Name        `xml:"DeleteResult"`
	Xmlns   string          `xml:"xmlns,attr"`
	Deleted []deletedObject `xml:"Deleted"`
	Errors  []deleteError   `xml:"Error"`
}

type deletedObject struct {
	Key string `xml:"Key"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
	// HighWaterMark is the key's mark on a stale refusal.
	HighWaterMark string `xml:"HighWaterMark,omitempty"`
}

// s3Namespace is the namespace of S3's documents.
const s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// listAllMyBucketsResult is ListBuckets' answer, as read from the store
// and written, filtered, to the client.
type listAllMyBucketsResult struct {
	XMLName xml.Name `xml:"ListAllMyBucketsResult"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Owner   *struct {
		ID          string `xml:"ID"`
		DisplayName string `xml:"DisplayName,omitempty"`
	} `xml:"Owner,omitempty"`
	Buckets struct {
		Bucket []struct {
			Name         string `xml:"Name"`
			CreationDate string `xml:"CreationDate"`
			BucketRegion string `xml:"BucketRegion,omitempty"`
		} `xml:"Bucket"`
	} `xml:"Buckets"`
	ContinuationToken string `xml:"ContinuationToken,omitempty"`
	Prefix            string `xml:"Prefix,omitempty"`
}
