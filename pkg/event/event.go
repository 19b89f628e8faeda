// Package event is the contract between the gateway and the order service:
// the OrderPlaced message published to Kafka once a unit is reserved. Its JSON
// encoding is fixed by golden files in testdata; change it only compatibly.
package event

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Version is the schema version written in every event.
const Version = 1

// MaxUserIDLen bounds user ids everywhere they are stored or keyed.
const MaxUserIDLen = 128

// OrderPlaced says that a shopper reserved one unit of an item. The gateway
// publishes it on every partition in turn (or keyed by item id, with
// FLASHSALE_PUBLISH_SPREAD=false); the order service turns it into exactly one
// order row, or a visible REJECTED one whose unit goes back.
type OrderPlaced struct {
	Version  int       `json:"v"`
	OrderID  uuid.UUID `json:"orderId"`
	SaleID   int64     `json:"saleId"`
	ItemID   int64     `json:"itemId"`
	UserID   string    `json:"userId"`
	PlacedAt time.Time `json:"placedAt"`
	// AdmissionID is the admission token the reservation spent (its queue
	// ticket), for a queued sale; "" otherwise, and then not written. The
	// order service keeps it with the order, so that a hot copy rebuilt
	// from PostgreSQL after a Redis loss knows which admissions bought a
	// unit (an admission buys once). Readers before it ignore the field;
	// see ValidAdmissionID.
	AdmissionID string `json:"admissionId,omitempty"`
}

// MaxAdmissionIDLen bounds an admission id: printable ASCII, as the
// gateway's queue tickets are.
const MaxAdmissionIDLen = 64

// ValidUserID reports whether a user id can be keyed and stored: 1 to
// MaxUserIDLen bytes of valid UTF-8 without control characters (PostgreSQL
// text cannot hold a NUL, and such an id would be retried forever).
func ValidUserID(id string) bool {
	if id == "" || len(id) > MaxUserIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// ValidAdmissionID reports whether an admission id can be kept with its
// order: "" (no admission), or 1 to MaxAdmissionIDLen bytes of printable
// ASCII. An event is valid whatever its admission id: the field is
// bookkeeping, and an order must not be lost to it; a gateway leaves out an
// id that is not valid, and the order service stores none for it.
func ValidAdmissionID(id string) bool {
	if len(id) > MaxAdmissionIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// ErrInvalid marks a payload that is not a valid OrderPlaced; such a message
// can never succeed and goes to the dead-letter topic.
var ErrInvalid = errors.New("event: invalid OrderPlaced")

// ErrNewerVersion (an ErrInvalid) marks an event of a schema version newer
// than this reader knows: a gateway upgraded before the order service. Its
// order may have been answered 202, so a reader must not take it for
// garbage and give its unit back; it sets it aside for a reader that knows
// the version.
var ErrNewerVersion = fmt.Errorf("%w: schema version newer than this reader's", ErrInvalid)

// Marshal encodes the event, byte for byte as encoding/json would
// (FuzzMarshalIsEncodingJSON). It writes the common event itself: the
// gateway marshals one per accepted purchase, and encoding/json's
// reflection was 4 % of its samples in a selling demo. An event whose user
// id is not plain printable ASCII (see plainJSON), or whose time is not in
// UTC or not in years 0 to 9999, goes through encoding/json.
func (e OrderPlaced) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if !plainJSON(e.UserID) || !plainJSON(e.AdmissionID) || e.PlacedAt.Location() != time.UTC || e.PlacedAt.Year() < 0 || e.PlacedAt.Year() > 9999 {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode OrderPlaced %s: %w", e.OrderID, err)
		}
		return b, nil
	}
	b := make([]byte, 0, 160+len(e.UserID)+len(e.AdmissionID))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"orderId":"`...)
	b = appendUUID(b, e.OrderID)
	b = append(b, `","saleId":`...)
	b = strconv.AppendInt(b, e.SaleID, 10)
	b = append(b, `,"itemId":`...)
	b = strconv.AppendInt(b, e.ItemID, 10)
	b = append(b, `,"userId":"`...)
	b = append(b, e.UserID...)
	b = append(b, `","placedAt":"`...)
	b = e.PlacedAt.AppendFormat(b, time.RFC3339Nano)
	if e.AdmissionID != "" {
		b = append(b, `","admissionId":"`...)
		b = append(b, e.AdmissionID...)
	}
	return append(b, `"}`...), nil
}

// plainJSON reports whether s is printable ASCII that encoding/json writes
// as it is between its quotes: none of the characters it escapes. (It
// also writes some other strings unescaped, DEL and non-ASCII UTF-8 among
// them; those go through encoding/json too.)
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendUUID appends u in its canonical form, as uuid.UUID.MarshalText
// writes it.
func appendUUID(b []byte, u uuid.UUID) []byte {
	var text [36]byte
	hex.Encode(text[0:8], u[0:4])
	text[8] = '-'
	hex.Encode(text[9:13], u[4:6])
	text[13] = '-'
	hex.Encode(text[14:18], u[6:8])
	text[18] = '-'
	hex.Encode(text[19:23], u[8:10])
	text[23] = '-'
	hex.Encode(text[24:], u[10:])
	return append(b, text[:]...)
}

// Unmarshal decodes and validates an event from untrusted bytes.
func Unmarshal(b []byte) (OrderPlaced, error) {
	var e OrderPlaced
	if err := json.Unmarshal(b, &e); err != nil {
		// A newer schema may have changed a field's type (placedAt as epoch
		// milliseconds): its version, read on its own, says so before the
		// event is taken for garbage and its unit given back.
		var v struct {
			Version int `json:"v"`
		}
		if json.Unmarshal(b, &v) == nil && v.Version > Version {
			return OrderPlaced{}, fmt.Errorf("%w (%d, this reader knows %d; %v)", ErrNewerVersion, v.Version, Version, err)
		}
		return OrderPlaced{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := e.Validate(); err != nil {
		return OrderPlaced{}, err
	}
	return e, nil
}

// Validate checks the fields a consumer relies on.
func (e OrderPlaced) Validate() error {
	switch {
	case e.Version > Version:
		return fmt.Errorf("%w (%d, this reader knows %d)", ErrNewerVersion, e.Version, Version)
	case e.Version != Version:
		return fmt.Errorf("%w: version %d, want %d", ErrInvalid, e.Version, Version)
	case e.OrderID == uuid.Nil:
		return fmt.Errorf("%w: missing order id", ErrInvalid)
	case e.SaleID <= 0 || e.ItemID <= 0:
		return fmt.Errorf("%w: sale %d item %d", ErrInvalid, e.SaleID, e.ItemID)
	case !ValidUserID(e.UserID):
		return fmt.Errorf("%w: user id of %d bytes is empty, too long or has control characters", ErrInvalid, len(e.UserID))
	case e.PlacedAt.IsZero():
		return fmt.Errorf("%w: missing placedAt", ErrInvalid)
	}
	return nil
}

// RejectPublishFailed is the reject_reason of the REJECTED row a gateway
// writes for an order whose publish it gave up on: the row takes the order
// id, so a late copy of the event is a duplicate the order service ignores.
const RejectPublishFailed = "PUBLISH_FAILED"

// RejectAbandoned is the reject_reason of the REJECTED row the order
// service writes for a reservation no order ever backed (its gateway died
// between the reserve and the publish) before giving its unit back: like
// RejectPublishFailed, the row takes the order id, so the order can never
// appear after its unit was sold again.
const RejectAbandoned = "RESERVATION_ABANDONED"
