package server

import ()
