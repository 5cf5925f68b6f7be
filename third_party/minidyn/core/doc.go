/*
Package core is used to receive the requests from clients and process them
with minidyn table and its interpreter
*/
package core
