// Package lua carries the Redis scripts of flashsale. They are files so they
// can be read and reviewed as Lua, and embedded so every binary carries the
// exact text it runs.
package lua

import _ "embed"

// Reserve takes one unit of an item for a user in one atomic step.
//
//go:embed reserve.lua
var Reserve string

// Release gives back the unit held by one order, at most once.
//
//go:embed release.lua
var Release string

// ReturnToken makes a spent admission token good again, unless its shopper
// holds a unit now.
//
//go:embed return_token.lua
var ReturnToken string

// Load writes a sale's stock and active holders from PostgreSQL's numbers.
//
//go:embed load.lua
var Load string

// HoldersState reads a slot's holders' state at one instant, or records
// it as settled if it is still the state read before.
//
//go:embed holders_state.lua
var HoldersState string

// QueueJoin gives a user a place in a sale's virtual queue.
//
//go:embed queue_join.lua
var QueueJoin string

// QueueStatus tells where a ticket stands and keeps it alive.
//
//go:embed queue_status.lua
var QueueStatus string

// QueueAdvance admits shoppers at the operator's rate.
//
//go:embed queue_advance.lua
var QueueAdvance string

// QueueSize counts the places still waiting for admission.
//
//go:embed queue_size.lua
var QueueSize string

// MoveTake takes units from one stock key and journals the move.
//
//go:embed move_take.lua
var MoveTake string

// MoveGive adds a journaled move's units to its destination, once.
//
//go:embed move_give.lua
var MoveGive string

// SlotRead reads one hash slot of a sharded sale at one instant.
//
//go:embed slot_read.lua
var SlotRead string

// Pause takes a slot's stock keys away before a sharded repair.
//
//go:embed pause.lua
var Pause string
