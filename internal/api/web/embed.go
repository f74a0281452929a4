// Package web is the dashboard the API server serves at /: one page, its
// script and style, and uPlot (MIT, see LICENSE.uPlot) for the charts, all
// built into the binary so the page needs nothing from the network.
package web

import "embed"

// FS holds the dashboard's files.
//
//go:embed index.html app.js app.css uPlot.iife.min.js uPlot.min.css LICENSE.uPlot
var FS embed.FS
